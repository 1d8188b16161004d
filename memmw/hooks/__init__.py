"""Lifecycle hooks of the agent middleware (bootstrap, session archive, flush, user callbacks)."""

from memmw.hooks.registry import Event, HookCallback, HookContext, HookRegistry

__all__ = ["Event", "HookCallback", "HookContext", "HookRegistry"]
