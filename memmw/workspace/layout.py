"""The workspace's file layout: which files are memory, where daily notes and archives go."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
import unicodedata
from pathlib import Path, PurePosixPath

from memmw.config import Source

#: The curated root files (chunked per entry, never decayed, private to direct sessions).
ROOT_FILES = ("MEMORY.md", "memory.md", "USER.md")
#: The long-term memory file, in order of preference (``memory.md`` only without ``MEMORY.md``).
LONG_TERM_FILES = ("MEMORY.md", "memory.md")
#: The user profile file.
USER_FILE = "USER.md"
#: Dream notes at the root: readable with ``memory_get``, never appended to.
DREAMS_FILE = "DREAMS.md"
#: The folder of daily notes, session archives and topic notes.
MEMORY_DIR = "memory"
#: Root file private to direct sessions besides the curated ones (working memory).
WORKING_MEMORY_FILE = "active-context.md"
#: Notes written from group and channel sessions: ``memory/groups/<scope>/`` (untrusted).
GROUP_NOTES_DIR = "memory/groups"
#: Each non-owner principal's private memory: ``memory/principals/<id>/`` holds its
#: ``USER.md`` (profile) and ``MEMORY.md`` (long-term notes), written by hand or the agent,
#: and its daily notes and ``/new`` archives ``YYYY-MM-DD[-slug].md``. Read and written
#: only by that principal's own direct sessions.
PRINCIPALS_DIR = "memory/principals"

_DATED = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:-.+)?\.md$")


def daily_note_path(day: dt.date) -> str:
    """``memory/YYYY-MM-DD.md``: the daily note of ``day`` (where flushes and appends go)."""
    return f"{MEMORY_DIR}/{day.isoformat()}.md"


def group_note_dir(scope: str) -> str:
    """``memory/groups/<scope>``: where a group session's appends, flushes and archives go."""
    return f"{GROUP_NOTES_DIR}/{scope}"


def group_note_path(scope: str, day: dt.date) -> str:
    """``memory/groups/<scope>/YYYY-MM-DD.md``: a group session's daily note."""
    return f"{group_note_dir(scope)}/{day.isoformat()}.md"


def is_group_note(path: str) -> bool:
    """True for anything under ``memory/groups/`` (written from a group or channel session)."""
    return path.startswith(GROUP_NOTES_DIR + "/")


def group_scope_of(path: str) -> str | None:
    """The scope of a note under ``memory/groups/<scope>/``, else None."""
    if not is_group_note(path):
        return None
    parts = PurePosixPath(path).parts
    return parts[2] if len(parts) >= 4 else None


def principal_dir(principal: str) -> str:
    """``memory/principals/<id>``: a principal's private memory folder."""
    return f"{PRINCIPALS_DIR}/{principal}"


def principal_note_path(principal: str, day: dt.date) -> str:
    """``memory/principals/<id>/YYYY-MM-DD.md``: a principal's daily note."""
    return f"{principal_dir(principal)}/{day.isoformat()}.md"


def is_principal_note(path: str) -> bool:
    """True for anything under ``memory/principals/`` (a principal's private memory)."""
    return path.startswith(PRINCIPALS_DIR + "/")


def principal_of(path: str) -> str | None:
    """The principal whose folder ``memory/principals/<id>/...`` holds ``path``, else None."""
    if not is_principal_note(path):
        return None
    parts = PurePosixPath(path).parts
    return parts[2] if len(parts) >= 4 else None


def principal_curated_files(workspace: Path, principal: str) -> list[str]:
    """The principal's ``MEMORY.md`` and ``USER.md`` that exist (regular files only)."""
    folder = workspace
    for part in principal_dir(principal).split("/"):
        folder = folder / part
        if not folder.is_dir() or folder.is_symlink():
            return []
    return [
        f"{principal_dir(principal)}/{name}"
        for name in (LONG_TERM_FILES[0], USER_FILE)
        if _regular(folder / name)
    ]


def archive_path(memory_dir: Path, day: dt.date, slug: str) -> Path:
    """``memory/<day>-<slug>.md`` for a session archive, ``-2``, ``-3``... when taken."""
    base = f"{day.isoformat()}-{slug}"
    candidate = memory_dir / f"{base}.md"
    n = 2
    while candidate.exists() or candidate.is_symlink():
        candidate = memory_dir / f"{base}-{n}.md"
        n += 1
    return candidate


def file_date(path: str) -> tuple[int, int, int] | None:
    """``(y, m, d)`` of a dated memory file (``memory/**/YYYY-MM-DD[-slug].md``), else None."""
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or parts[0] != MEMORY_DIR:
        return None
    m = _DATED.match(parts[-1])
    if not m:
        return None
    y, mo, d = (int(g) for g in m.groups())
    try:
        dt.date(y, mo, d)
    except ValueError:
        return None
    return y, mo, d


def is_curated(path: str) -> bool:
    """True for root ``MEMORY.md``/``memory.md``/``USER.md`` (chunked per entry, evergreen)."""
    return path in ROOT_FILES


def is_dreams(path: str) -> bool:
    """True for the root dream notes (any case of ``DREAMS.md``)."""
    return path.lower() == DREAMS_FILE.lower()


def is_memory_path(path: str) -> bool:
    """True for workspace-relative paths ``memory_get`` may read (extra paths aside)."""
    return path in ROOT_FILES or is_dreams(path) or path.startswith(MEMORY_DIR + "/")


_PRIVATE_ROOT = frozenset(n.casefold() for n in (*ROOT_FILES, WORKING_MEMORY_FILE))
_TRAILING = " .\u3000"


def fold_path(rel: str) -> str:
    """A workspace-relative posix path folded for comparison: NFKC, case, trailing dots/spaces."""
    if rel.isascii():
        text = rel.lower()  # the same as NFKC + casefold for ASCII, and much faster
    else:
        text = unicodedata.normalize("NFKC", rel).casefold()
        text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    parts = [p.rstrip(_TRAILING) for p in text.split("/")]
    return "/".join(p for p in parts if p not in ("", "."))


def is_private_path(path: str, source: str = Source.MEMORY) -> bool:
    """True for what only direct (private) sessions may see, by name (folded, fail closed).

    That is ``MEMORY.md``/``memory.md``/``USER.md``, ``active-context.md``, the dated
    notes under ``memory/`` (the daily log and the ``/new`` session archives of private
    sessions) and session transcripts, in any case or compatibility form
    (:func:`fold_path`), and everything under ``memory/principals/`` (each principal's
    own memory, read only by that principal's sessions). Undated topic notes under
    ``memory/`` and extra paths (shared
    folders) stay visible to group and channel sessions; so do the notes under
    ``memory/groups/`` (only to the group that wrote them). This is the rule by name;
    :meth:`memmw.workspace.access.SessionAccess.check` applies it to the resolved file.
    """
    if source != Source.MEMORY:
        return True
    folded = fold_path(path)
    if folded.startswith("sessions/") or folded in _PRIVATE_ROOT:
        return True
    if is_principal_note(folded):
        return True
    if is_group_note(folded):
        return False
    if not folded.rpartition("/")[2][:1].isdigit():
        return False  # not a dated note (the cheap test before the full parse)
    return file_date(folded) is not None


def _regular(path: Path) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def curated_files(workspace: Path) -> list[str]:
    """The long-term file (``MEMORY.md``, else ``memory.md``) and ``USER.md`` that exist."""
    names = set(os.listdir(workspace)) if workspace.is_dir() else set()
    out: list[str] = []
    for name in LONG_TERM_FILES:
        if name in names and _regular(workspace / name):
            out.append(name)
            break
    if USER_FILE in names and _regular(workspace / USER_FILE):
        out.append(USER_FILE)
    return out


def dated_notes(
    workspace: Path, day: dt.date, max_archives: int, folder: str = MEMORY_DIR
) -> list[str]:
    """``<folder>/<day>.md`` and up to ``max_archives`` ``<folder>/<day>-*.md``, newest first.

    ``folder`` is ``memory`` (the owner's daily notes) or a group's ``memory/groups/<scope>``.
    Only existing regular files; nothing when a folder on the way is missing or a symlink.
    """
    memory_dir = workspace
    for part in folder.split("/"):
        memory_dir = memory_dir / part
        if not memory_dir.is_dir() or memory_dir.is_symlink():
            return []
    iso = day.isoformat()
    out: list[str] = []
    if _regular(memory_dir / f"{iso}.md"):
        out.append(f"{folder}/{iso}.md")
    archives = [p for p in memory_dir.glob(f"{iso}-*.md") if _regular(p)]
    archives.sort(key=lambda p: (p.stat().st_mtime, p.name), reverse=True)
    out.extend(f"{folder}/{p.name}" for p in archives[:max_archives])
    return out
