"""The working-memory writer: ``active-context.md`` replaced whole (it holds only the present)."""

from __future__ import annotations

import logging
from pathlib import Path

from memmw.errors import PathPolicyError
from memmw.redaction import redact_secrets
from memmw.workspace.files import atomic_write_text
from memmw.workspace.layout import WORKING_MEMORY_FILE
from memmw.workspace.locks import exclusive_lock

log = logging.getLogger(__name__)

#: The working-memory file, relative to the workspace.
ACTIVE_CONTEXT = WORKING_MEMORY_FILE


def write_active_context(workspace: Path, text: str) -> int:
    """Replace ``active-context.md`` (overwrite semantics: it holds only the present).

    The write is atomic (a crash leaves the old or the new file) and refuses symlinks.

    Returns:
        Characters written.
    """
    path = Path(workspace) / ACTIVE_CONTEXT
    if path.is_symlink():
        raise PathPolicyError(f"{ACTIVE_CONTEXT}: refusing to write through a symlink")
    text = redact_secrets(text)  # written from the conversation: the one redaction pass
    body = text if text.endswith("\n") or not text else text + "\n"
    with exclusive_lock(path.parent):
        atomic_write_text(path, body)
    log.info("active context replaced (%d chars)", len(body))
    return len(body)
