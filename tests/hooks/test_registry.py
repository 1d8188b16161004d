"""User callbacks for lifecycle events."""

from __future__ import annotations

import pytest

from memmw.hooks import Event, HookContext, HookRegistry


def test_callbacks_run_in_order_and_failures_are_isolated() -> None:
    seen: list[str] = []
    hooks = HookRegistry()

    def boom(ctx: HookContext) -> None:
        raise RuntimeError("user bug")

    hooks.on("compaction", lambda ctx: seen.append("a"))
    hooks.on(Event.COMPACTION, boom)
    hooks.on(Event.COMPACTION, lambda ctx: seen.append(ctx.session_id))
    hooks.emit(HookContext(Event.COMPACTION, "s1", "main", {"cycle": 1}))
    assert seen == ["a", "s1"]
    hooks.off("compaction", boom)
    hooks.off("compaction", boom)
    with pytest.raises(ValueError):
        hooks.on("nope", boom)
