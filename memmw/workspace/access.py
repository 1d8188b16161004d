"""The one privacy gate: what a session may read and trust, decided on the resolved file.

Every reader of memory files asks :meth:`SessionAccess.check` (``memory_get``,
``memory_search`` hits, ``memory_facts`` and the ``[GRAPH MEMORY]`` block through the
graph view, the bootstrap, the startup context, working memory, the MCP server's tools),
and every file text put into a prompt is read with :meth:`SessionAccess.prompt_text`,
which applies :func:`memmw.text.inert.inert_memory_text`.

A path is judged by what it names, not how it is spelled: the spelling is normalised
(``./``, ``//``, ``..``, backslashes, absolute paths, trailing slashes and dots) and
folded (Unicode compatibility forms and case, so ``user.md`` or ``ＵＳＥＲ.md`` count as
``USER.md``), symlinks are resolved (``realpath``), and a file with more than one hard
link is compared by ``(st_dev, st_ino)`` with every private file. A group session never
reads a private file under any name; it reads its own group's notes and not another
group's. Trust is decided the same way: only owner and agent files are ``trusted``;
notes under ``memory/groups/``, extra paths (wherever they live) and transcripts are not.

Principals: a direct session with someone other than the owner carries that person's
principal id. Its private memory is ``memory/principals/<id>/`` (and its transcripts,
``<session id>=<id>.jsonl``): readable by that principal's sessions only, never by the
owner, another principal or a group. Such a session reads no file private to the owner
(``MEMORY.md``, ``USER.md``, ``active-context.md``, the owner's dated notes) and no
group's notes; shared undated topic notes and extra paths stay readable to everyone. The
owner (no principal) reads what it read before principals existed, except their folders.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path

from memmw.chat_type import chat_type_for, check_principal_id, group_scope, principal_for
from memmw.config import ExtraPath, Source
from memmw.errors import ConfigError
from memmw.text.inert import inert_memory_text
from memmw.types import SearchHit
from memmw.workspace.files import is_ignored_dir, resolve_extra_path
from memmw.workspace.layout import (
    MEMORY_DIR,
    PRINCIPALS_DIR,
    fold_path,
    group_note_dir,
    group_scope_of,
    is_group_note,
    is_principal_note,
    is_private_path,
    principal_dir,
    principal_of,
)
from memmw.workspace.reading import read_prompt_bytes
from memmw.workspace.transcripts import transcript_principal

#: How long a gate trusts its list of private files' identities (seconds).
IDENTITY_TTL_S = 1.0
#: The owner of a private file in :meth:`SessionAccess.private_identities` (principals
#: are named by their ids; a file under ``memory/principals/`` outside any principal's
#: folder belongs to nobody: ``NOBODY``).
OWNER = ""
NOBODY = "/"


def _private_owner(rel: str) -> str | None:
    """Whose private file the folded workspace-relative ``rel`` is: ``OWNER``, an id, or None."""
    if is_principal_note(rel):
        return principal_of(rel) or NOBODY
    return OWNER if is_private_path(rel) else None


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """What :meth:`SessionAccess.check` decided about one file.

    Attributes:
        readable: The session may see the file (read it, get hits or facts from it).
        trusted: Owner- or agent-written: it may be injected as memory. Group notes,
            extra paths and transcripts are never trusted.
        private: The file is private to direct sessions.
        reason: Why it is not readable (empty when it is).
    """

    readable: bool
    trusted: bool
    private: bool
    reason: str = ""


def _relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` as posix (``os.path.relpath`` without its ``abspath``)."""
    if path == root:
        return "."
    prefix = root.rstrip(os.sep) + os.sep
    if path.startswith(prefix):
        return path[len(prefix) :].replace(os.sep, "/")
    return os.path.relpath(path, root).replace(os.sep, "/")


def _inside(rel: str) -> bool:
    return not (rel == ".." or rel.startswith("../") or os.path.isabs(rel))


@dataclass
class SessionAccess:
    """The privacy gate of one session.

    Args:
        workspace: The workspace root.
        extra_paths: Configured extra paths (readable by every session, never trusted).
        private: True for a direct (private) session.
        scope: A group session's own notes folder (``memory/groups/<scope>/``).
        principal: Who a direct session is with when it is not the owner (a validated
            id, see :func:`memmw.chat_type.check_principal_id`); None for the owner.
    """

    workspace: Path
    extra_paths: tuple[ExtraPath, ...] = ()
    private: bool = True
    scope: str | None = None
    principal: str | None = None
    _identities: dict[tuple[int, int], set[str]] | None = field(
        default=None, init=False, repr=False
    )
    _identities_at: float = field(default=0.0, init=False, repr=False)

    def __post_init__(self) -> None:
        self.workspace = Path(os.path.abspath(self.workspace))
        self.extra_paths = tuple(self.extra_paths)
        if self.principal is not None:
            self.principal = check_principal_id(self.principal)
            if not self.private:
                raise ConfigError("a principal's session is a direct session (private=True)")
        self._root = str(self.workspace)
        self._real_workspace = os.path.realpath(self.workspace)
        self._extra_roots = [
            os.path.realpath(resolve_extra_path(e, self.workspace)) for e in self.extra_paths
        ]

    @classmethod
    def for_session(
        cls,
        workspace: Path,
        extra_paths: Iterable[ExtraPath] = (),
        *,
        session_key: str | None = None,
        chat_type: str | None = None,
        private_kinds: Iterable[str] | None = None,
        principal: str | None = None,
        dm_scope: str = "main",
        owner_principals: Iterable[str] = (),
    ) -> SessionAccess:
        """The gate of a session, classified by :func:`memmw.chat_type.chat_type_for`.

        A direct session's principal is :func:`memmw.chat_type.principal_for` (the host's
        ``principal``, else the key's peer under ``dm_scope = "per-peer"``; the owner is
        None). A group's notes folder is the host's ``principal`` (the group or channel
        id) when given, else a scope derived from the session key.
        """
        private = chat_type_for(session_key, chat_type, private_kinds) == "direct"
        who = principal_for(
            session_key,
            chat_type,
            principal,
            dm_scope=dm_scope,
            owner_principals=owner_principals,
            private_kinds=private_kinds,
        )
        scope = None
        if not private:
            scope = check_principal_id(principal) if principal else group_scope(session_key)
        return cls(
            workspace=Path(workspace),
            extra_paths=tuple(extra_paths),
            private=private,
            scope=scope,
            principal=who,
        )

    @property
    def notes_dir(self) -> str:
        """Where this session's notes go: ``memory``, its principal's or its group's folder."""
        if not self.private:
            return group_note_dir(self.scope or "group")
        return principal_dir(self.principal) if self.principal is not None else MEMORY_DIR

    # -- identities of the private files ---------------------------------------------
    def private_identities(self) -> dict[tuple[int, int], set[str]]:
        """``(st_dev, st_ino)`` of every private file in the workspace, and whose it is.

        The owners are ``OWNER`` (the owner's private files) and principal ids (files
        under ``memory/principals/<id>/``).

        Listed again when older than :data:`IDENTITY_TTL_S` (a gate lives as long as its
        session; files and links change meanwhile), and only asked for files with more
        than one hard link.
        """
        now = time.monotonic()
        if self._identities is not None and now - self._identities_at < IDENTITY_TTL_S:
            return self._identities
        found: dict[tuple[int, int], set[str]] = {}

        def add(path: str, owner: str) -> None:
            try:
                st = os.stat(path)
            except OSError:
                return
            if stat.S_ISREG(st.st_mode):
                found.setdefault((st.st_dev, st.st_ino), set()).add(owner)

        try:
            top = os.listdir(self.workspace)
        except OSError:
            top = []
        for name in top:
            if is_private_path(name):
                add(os.path.join(self.workspace, name), OWNER)
        memory_dir = os.path.join(self.workspace, MEMORY_DIR)
        for dirpath, dirnames, filenames in os.walk(memory_dir):
            dirnames[:] = [d for d in dirnames if not is_ignored_dir(d)]
            for name in filenames:
                full = os.path.join(dirpath, name)
                rel = fold_path(os.path.relpath(full, self.workspace).replace(os.sep, "/"))
                owner = _private_owner(rel)
                if owner is not None:
                    add(full, owner)
        self._identities = found
        self._identities_at = now
        return found

    def refresh(self) -> None:
        """Forget the private identities (the files may have changed)."""
        self._identities = None

    # -- the gate --------------------------------------------------------------------
    def _resolve(self, path: str) -> tuple[str, os.stat_result | None, str, str]:
        """``(real path, its stat or None, folded lexical and real workspace-relative paths)``.

        Inside the workspace the path is resolved from the workspace's realpath one
        component at a time (``lstat`` each; any symlink hands over to ``realpath``),
        which costs a couple of system calls instead of one per component of the
        absolute path.
        """
        text = str(path).strip().replace("\\", "/")
        joined = text if os.path.isabs(text) else os.path.join(self._root, text)
        candidate = os.path.normpath(joined)
        lexical = _relative(candidate, self._root)
        real: str | None = None
        st: os.stat_result | None = None
        if _inside(lexical) and lexical != ".":
            current = self._real_workspace
            parts = lexical.split("/")
            for i, part in enumerate(parts):
                current = os.path.join(current, part)
                try:
                    st = os.lstat(current)
                except (FileNotFoundError, NotADirectoryError):
                    st = None  # nothing there: the rest of the name is lexical
                    real = os.path.join(current, *parts[i + 1 :])
                    break
                if stat.S_ISLNK(st.st_mode):
                    st = None  # a link on the way: let realpath follow it
                    break
            else:
                real = current
        if real is None:
            real = os.path.realpath(candidate)
            try:
                st = os.stat(real)
            except OSError:
                st = None
        return real, st, fold_path(lexical), fold_path(_relative(real, self._real_workspace))

    def check(self, path: str, source: str = Source.MEMORY) -> Verdict:
        """Decide whether this session may read ``path`` and whether its text is trusted.

        Args:
            path: A path as a tool, a search hit or a graph row spells it.
            source: Index source: ``sessions`` (transcripts) is private and untrusted.
        """
        if source != Source.MEMORY:
            mine = transcript_principal(str(path)) == self.principal
            reason = ""
            if not self.private:
                reason = "session transcripts are private"
            elif not mine:
                reason = "a transcript of another person's sessions"
            return Verdict(
                readable=not reason, trusted=False, private=True, reason=reason
            )
        try:
            real, st, lexical, real_rel = self._resolve(path)
        except (ValueError, OSError):
            return Verdict(readable=False, trusted=False, private=True, reason="unusable path")
        names = [r for r in (lexical, real_rel) if _inside(r)]
        owners = {o for o in map(_private_owner, names) if o is not None}
        if st is not None and st.st_nlink > 1 and stat.S_ISREG(st.st_mode):
            owners |= self.private_identities().get((st.st_dev, st.st_ino), set())
        private = bool(owners)
        group_note = any(is_group_note(r) for r in names)
        extra = any(
            real == root or real.startswith(root.rstrip(os.sep) + os.sep)
            for root in self._extra_roots
        )
        trusted = bool(names) and not group_note and not extra
        me = OWNER if self.principal is None else self.principal
        if self.private:
            if owners - {me}:
                return Verdict(
                    readable=False,
                    trusted=trusted,
                    private=True,
                    reason="private memory of "
                    + ("the owner" if OWNER in owners - {me} else "another person")
                    + " (under any name or link)",
                )
            if group_note and self.principal is not None:
                return Verdict(
                    readable=False,
                    trusted=False,
                    private=False,
                    reason="notes of a group or channel",
                )
            return Verdict(readable=True, trusted=trusted, private=private)
        if private:
            return Verdict(
                readable=False,
                trusted=trusted,
                private=True,
                reason="private to direct sessions (MEMORY.md, USER.md, dated notes, "
                "session archives, working memory and each person's memory, under any "
                "name or link)",
            )
        scopes = {group_scope_of(r) for r in names if is_group_note(r)}
        if group_note and (self.scope is None or scopes != {fold_path(self.scope)}):
            return Verdict(
                readable=False,
                trusted=False,
                private=False,
                reason="notes of another group or channel",
            )
        return Verdict(readable=True, trusted=trusted, private=False)

    def shown(self, hit: SearchHit) -> SearchHit | None:
        """``hit`` as this session is shown it: None when :meth:`check` refuses its file,
        marked ``untrusted`` when the session does not trust the file's text."""
        verdict = self.check(hit.path, hit.source)
        if not verdict.readable:
            return None
        return hit if verdict.trusted else replace(hit, untrusted=True)

    def may_hide(self) -> bool:
        """Whether :meth:`shown` may hide a hit of this agent's memory from this session.

        False only for the owner's direct session in a workspace without principals'
        folders (it reads every memory file); a search for any other session fetches
        more than it returns, to make up for the hits this gate hides.
        """
        return (
            not self.private
            or self.principal is not None
            or (self.workspace / PRINCIPALS_DIR).is_dir()
        )

    def may_read(self, path: str, source: str = Source.MEMORY) -> bool:
        """``check(path, source).readable``."""
        return self.check(path, source).readable

    def injectable(self, path: str, source: str = Source.MEMORY) -> bool:
        """Readable and trusted: may be injected into this session's prompt as memory."""
        verdict = self.check(path, source)
        return verdict.readable and verdict.trusted

    # -- reading for prompts ---------------------------------------------------------
    def prompt_text(self, rel: str, *, max_bytes: int | None = None) -> tuple[str, bool] | None:
        """The text of ``rel`` ready for a prompt (inert), or None when not readable.

        Symlinks and non-regular files are never read. Returns the text and whether the
        file was longer than ``max_bytes``.

        Raises:
            OSError: the file cannot be read.
        """
        if not self.may_read(rel):
            return None
        read = read_prompt_bytes(self.workspace / rel, max_bytes)
        if read is None:
            return None
        data, more = read
        return inert_memory_text(data.decode("utf-8", errors="replace")), more

