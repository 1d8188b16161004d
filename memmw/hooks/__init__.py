"""Lifecycle hooks of the agent middleware (bootstrap, session archive, flush)."""
