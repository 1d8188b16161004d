"""Working, identity and project memory: active-context.md, SOUL.md and project-<slug>.md."""

from __future__ import annotations

import dataclasses
import logging
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING

from memmw.config import ActiveMemoryConfig
from memmw.text.analysis import utf16_len
from memmw.workspace.access import SessionAccess
from memmw.workspace.active_context import ACTIVE_CONTEXT
from memmw.workspace.active_context import write_active_context as write_active_context
from memmw.workspace.reading import CAPS

if TYPE_CHECKING:  # bootstrap imports this module
    from memmw.hooks.bootstrap import BootstrapContext

log = logging.getLogger(__name__)

SOUL = "SOUL.md"
PROJECT_PREFIX = "project-"
HEADING = "## Working Memory"


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def _cut(text: str, limit: int) -> tuple[str, bool]:
    from memmw.hooks.bootstrap import truncate_middle

    return truncate_middle(text, limit)


def working_files(
    workspace: Path, config: ActiveMemoryConfig, *, private: bool
) -> list[tuple[str, Path, int]]:
    """``(label, path, char budget)`` of the working-memory files to load, in order.

    ``SOUL.md`` (identity) in every session; ``active-context.md`` and the project files
    (``project-<slug>.md`` in the workspace or ``project_dir``) in private sessions only.
    """
    out: list[tuple[str, Path, int]] = []
    workspace = Path(workspace)
    if _regular(workspace / SOUL):
        out.append((SOUL, workspace / SOUL, config.soul_max_chars))
    if not private:
        return out
    if _regular(workspace / ACTIVE_CONTEXT):
        out.append((ACTIVE_CONTEXT, workspace / ACTIVE_CONTEXT, config.active_context_max_chars))
    folder = Path(os.path.expanduser(config.project_dir)) if config.project_dir else workspace
    if not folder.is_absolute():
        folder = workspace / folder
    if folder.is_dir():
        projects = sorted(
            p for p in folder.glob(f"{PROJECT_PREFIX}*.md") if _regular(p)
        )
        for p in projects:
            label = p.name if folder == workspace else f"{config.project_dir}/{p.name}"
            out.append((label, p, config.project_max_chars))
    return out


def working_memory_section(
    workspace: Path,
    config: ActiveMemoryConfig,
    *,
    private: bool,
    access: SessionAccess | None = None,
) -> tuple[str, list[str], bool]:
    """Render the working-memory section: ``(text, paths loaded, truncated)``.

    Each file is capped at its budget (75% head, 25% tail with a marker); project files
    share ``project_max_chars``. Truncation adds a visible note. Files are read through
    the session's privacy gate (``access``, else one for ``private``): inert text, and a
    group session never gets a file that is a private one under another name.
    """
    if not config.working_memory:
        return "", [], False
    gate = access or SessionAccess(workspace=Path(workspace), private=private)
    blocks: list[str] = []
    loaded: list[str] = []
    truncated = False
    project_left = config.project_max_chars
    for label, path, budget in working_files(workspace, config, private=private):
        try:
            if path.stat().st_size > CAPS.prompt:
                truncated = True
                continue
            read = gate.prompt_text(str(path))
        except OSError as exc:
            log.warning("working memory: cannot read %s: %s", label, type(exc).__name__)
            continue
        if read is None:
            continue
        text = read[0].strip("\n")
        if not text.strip():
            continue
        is_project = label.rsplit("/", 1)[-1].startswith(PROJECT_PREFIX)
        if is_project:
            budget = min(budget, project_left)
            if budget < 64:
                truncated = True
                continue
        shown, cut = _cut(text, budget)
        truncated = truncated or cut
        if is_project:
            project_left -= utf16_len(shown)
        blocks.append(f"\n### {label}\n{shown}\n")
        loaded.append(label)
    if not blocks:
        return "", [], truncated
    intro = (
        f"{HEADING}\n"
        "Identity, the current working context and shared project notes, loaded by the "
        "memory runtime (background, not instructions from the user).\n"
    )
    note = (
        "\n> Some working-memory files were shortened to fit their budget; read them "
        "directly for the full text.\n"
        if truncated
        else ""
    )
    return intro + "".join(blocks) + note, loaded, truncated


def with_working_memory(
    context: BootstrapContext,
    workspace: Path,
    config: ActiveMemoryConfig,
    *,
    private: bool,
    access: SessionAccess | None = None,
) -> BootstrapContext:
    """The bootstrap context with the working-memory section appended."""
    text, _loaded, truncated = working_memory_section(
        workspace, config, private=private, access=access
    )
    if not text:
        return context
    joined = f"{context.text.rstrip()}\n\n{text}" if context.text else text
    return dataclasses.replace(
        context, text=joined, truncated=context.truncated or truncated
    )
