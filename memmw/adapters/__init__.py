"""Thin adapters from agent frameworks to the memmw middleware (imported lazily)."""
