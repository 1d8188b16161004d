"""The agent surface: memory tools and their payloads, prompt sections, chat messages.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""
