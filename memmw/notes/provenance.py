"""Provenance of derived rows, decided by the file they come from (never by their text)."""

from __future__ import annotations

import calendar
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from memmw.config import Source
from memmw.workspace.files import (
    MEMORY_DIR,
    ROOT_FILES,
    WORKING_MEMORY_FILE,
    file_date,
    is_private_path,
)
from memmw.workspace.layout import is_group_note

Origin = Literal["owner", "agent", "system", "untrusted"]
SessionKind = Literal["interactive", "group", "cron", "heartbeat", "subagent", "unknown"]
#: Least trusted last: a chunk or row mixing classes takes the least trusted one.
TRUST_ORDER: tuple[Origin, ...] = ("owner", "agent", "system", "untrusted")


@dataclass(frozen=True, kw_only=True)
class Provenance:
    """Who wrote a file's entries and when, as far as the index can tell from the path.

    Attributes:
        origin: ``owner`` (curated root files), ``agent`` (notes under ``memory/``),
            ``system`` (files memmw writes itself) or ``untrusted`` (imports, transcripts,
            notes under ``memory/groups/`` written from group sessions).
        session_kind: The session kind that wrote it (``unknown`` when not known).
        observed_at: Epoch seconds of the file's date (dated notes), else None.
        private: True for files that group and channel sessions never see.
    """

    origin: Origin
    session_kind: SessionKind
    observed_at: float | None
    private: bool

    @property
    def injectable(self) -> bool:
        """Only owner- and agent-written entries are ever injected."""
        return self.origin in ("owner", "agent")


def provenance_for(path: str, source: str = Source.MEMORY) -> Provenance:
    """The provenance of a workspace file by its path and source.

    Args:
        path: Workspace-relative posix path (``../`` prefixed outside the workspace).
        source: Index source (``memory`` or ``sessions``).
    """
    date = file_date(path)
    observed = float(calendar.timegm((*date, 0, 0, 0))) if date else None
    if source != Source.MEMORY or path.startswith("../"):
        return Provenance(origin="untrusted", session_kind="unknown", observed_at=observed, private=True)
    if path in ROOT_FILES:
        return Provenance(origin="owner", session_kind="unknown", observed_at=None, private=True)
    if path == WORKING_MEMORY_FILE:
        return Provenance(origin="agent", session_kind="interactive", observed_at=None, private=True)
    if is_group_note(path):
        # Written from a group or channel session: shown fenced, never injected as memory.
        return Provenance(origin="untrusted", session_kind="group", observed_at=observed, private=False)
    parts = PurePosixPath(path).parts
    if parts and parts[0] == MEMORY_DIR:
        # Dated notes are written by the flush and the session archive of a conversation,
        # so they are private to direct sessions like the curated files.
        kind: SessionKind = "interactive" if date else "unknown"
        return Provenance(
            origin="agent", session_kind=kind, observed_at=observed, private=is_private_path(path)
        )
    return Provenance(origin="untrusted", session_kind="unknown", observed_at=observed, private=True)
