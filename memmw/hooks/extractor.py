"""An optional fact extractor run on each session archive; its facts go to the Markdown first."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memmw.hooks.registry import HookCallback, HookContext
from memmw.workspace.reading import read_markdown

log = logging.getLogger(__name__)


def extractor_hook(memory: Any, extractor: Callable[[str], Any]) -> HookCallback:
    """A callback for ``middleware.hooks.on(Event.ARCHIVE, ...)``.

    After a session archive (``memory/<date>-<slug>.md``) is written, ``extractor`` (for
    example an LLM call returning ``[{"entity", "key", "value"}, ...]``) reads it, and the
    facts it proposes are appended to that archive in the fact syntax, then indexed.
    Failures are logged and never reach the session.

    Args:
        memory: The engine (:class:`memmw.Memory`; needs ``extract_facts``).
        extractor: ``text -> proposed facts``.
    """

    def on_archive(ctx: HookContext) -> None:
        path = ctx.data.get("path")
        if not path:
            return
        try:
            text = read_markdown(Path(path))[0]
            rel = Path(os.path.relpath(path, memory.workspace)).as_posix()
            written, count = memory.extract_facts(text, extractor, path=rel)
            log.info("extractor proposed %d facts for %s", count, written)
        except Exception as exc:
            log.warning("fact extraction after archive failed: %s", type(exc).__name__)
            log.debug("fact extraction failure", exc_info=True)

    return on_archive
