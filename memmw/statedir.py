"""Where derived state lives by default: one folder per workspace in the user state dir.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")

#: The folder of a state folder holding the agents' SQLite indexes (``<state>/memory/<agent>.sqlite``).
INDEX_DIR = "memory"
#: The key of ``flush-state.json`` (and of the status's flush section) that maps each
#: chat session to its flush record: chat sessions, not the transcript source.
FLUSH_SESSIONS_KEY = "sessions"


def user_state_root() -> Path:
    """The platform's per-user state folder for memmw (``platformdirs``).

    Linux: ``$XDG_STATE_HOME/memmw`` (default ``~/.local/state/memmw``); macOS:
    ``~/Library/Application Support/memmw``; Windows: ``%LOCALAPPDATA%\\memmw``.
    """
    import platformdirs  # imported here so that ``import memmw`` needs only numpy

    return Path(platformdirs.user_state_dir("memmw", appauthor=False))


def workspace_key(workspace: str | os.PathLike[str]) -> str:
    """A readable, collision-free folder name for a workspace: ``<name>-<12 hex>``.

    The hash is of the resolved absolute path, so two folders with the same name get
    different keys and a symlinked path maps to the folder it points to.
    """
    path = Path(workspace).expanduser().resolve()
    slug = _UNSAFE.sub("-", path.name).strip("-.")[:40] or "root"
    digest = hashlib.sha256(str(path).encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{slug}-{digest}"


def default_state_dir(workspace: str | os.PathLike[str]) -> Path:
    """``<user state root>/workspaces/<workspace key>``: each workspace its own index."""
    return user_state_root() / "workspaces" / workspace_key(workspace)


#: The per-agent file holding each session's flush cycle, watermark and unsaved evictions.
FLUSH_STATE_FILE = "flush-state.json"


def flush_state_path(state_dir: str | os.PathLike[str], agent_id: str) -> Path:
    """``<state_dir>/agents/<agent_id>/flush-state.json`` (the flush hook writes it,
    ``Memory.status()`` reads its unsaved-eviction counts)."""
    return Path(state_dir) / "agents" / agent_id / FLUSH_STATE_FILE
