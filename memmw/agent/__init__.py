"""The agent surface: memory tools and their payloads, prompt sections, chat messages."""
