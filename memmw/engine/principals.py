"""Operators' view of principals: who has private memory here, and deleting one's memory.

A principal's memory is its folder ``memory/principals/<id>/`` (Markdown, the source of
truth), its transcripts (``<session id>=<id>.jsonl`` in the state folder) and the index
rows derived from both. :func:`delete_principal` removes all three in one call and
checks the index afterwards.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.chat_type import PRINCIPAL_PATTERN, check_principal_id
from memmw.config import Source
from memmw.engine.memory import Memory
from memmw.errors import MemmwError
from memmw.workspace.layout import PRINCIPALS_DIR, fold_path, principal_dir, principal_of
from memmw.workspace.transcripts import TranscriptStore, transcript_principal


@dataclass(frozen=True, kw_only=True)
class PrincipalSummary:
    """One principal's memory, as ``memmw principals`` and ``memmw status`` show it.

    Attributes:
        principal: The id.
        files: Markdown files in its folder.
        bytes: Their total size.
        indexed_files: Files of its folder (and transcripts) in the index.
        chunks: Index chunks of those files.
        facts: Facts the knowledge graph holds from them.
        transcripts: Transcript files of its sessions.
        last_write: Newest modification time of its files (epoch seconds), if any.
    """

    principal: str
    files: int
    bytes: int
    indexed_files: int
    chunks: int
    facts: int
    transcripts: int
    last_write: float | None

    def to_payload(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "principal": self.principal,
            "files": self.files,
            "bytes": self.bytes,
            "indexedFiles": self.indexed_files,
            "chunks": self.chunks,
            "facts": self.facts,
            "transcripts": self.transcripts,
            "lastWrite": self.last_write,
        }


@dataclass(frozen=True, kw_only=True)
class PrincipalDeletion:
    """What :func:`delete_principal` removed (or would remove, dry).

    Attributes:
        principal: The id.
        files: Workspace-relative Markdown files (and links) removed.
        transcripts: Transcript file names removed.
        remaining: Index rows (files, chunks, facts) of the principal left afterwards:
            zero after a real deletion, else it raised.
        dry_run: Nothing was changed.
    """

    principal: str
    files: tuple[str, ...]
    transcripts: tuple[str, ...]
    remaining: int
    dry_run: bool

    def to_payload(self) -> dict[str, Any]:
        """A JSON-ready dict."""
        return {
            "principal": self.principal,
            "files": list(self.files),
            "transcripts": list(self.transcripts),
            "remaining": self.remaining,
            "dryRun": self.dry_run,
        }


def _owner_of(path: str, source: str) -> str | None:
    if source == Source.MEMORY:
        return principal_of(fold_path(path))
    return transcript_principal(path)


def _folder_files(workspace: Path, principal: str) -> list[Path]:
    """Every entry under the principal's folder (files and links), never following links."""
    root = workspace / principal_dir(principal)
    if root.is_symlink():
        return [root]
    found: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        here = Path(dirpath)
        found.extend(here / n for n in filenames)
        found.extend(here / d for d in dirnames if (here / d).is_symlink())
    return sorted(found)


def _index_rows(memory: Memory) -> dict[str, list[int]]:
    """``{principal: [files, chunks, facts]}`` from the index (every source)."""
    out: dict[str, list[int]] = {}
    with memory.store.read() as reader:
        for source in Source:  # whatever this config indexes now
            for path in reader.file_records(source):
                who = _owner_of(path, source)
                if who is not None:
                    out.setdefault(who, [0, 0, 0])[0] += 1
        rows = reader.graph_rows()
        for fact in rows.facts:
            who = principal_of(fold_path(str(fact[6])))
            if who is not None:
                out.setdefault(who, [0, 0, 0])[2] += 1
        for source in Source:
            ids = reader.chunk_rowids([source])
            for chunk in reader.chunks(ids).values():
                who = _owner_of(chunk.path, source)
                if who is not None:
                    out.setdefault(who, [0, 0, 0])[1] += 1
    return out


def list_principals(memory: Memory) -> list[PrincipalSummary]:
    """Every principal with files, transcripts or index rows here, sorted by id."""
    workspace = Path(memory.workspace)
    transcripts = TranscriptStore(memory.state_dir, memory.agent_id)
    ids: set[str] = set()
    base = workspace / PRINCIPALS_DIR
    if base.is_dir():
        ids |= {p.name.lower() for p in base.iterdir() if PRINCIPAL_PATTERN.fullmatch(p.name.lower())}
    if transcripts.dir.is_dir():
        ids |= {
            who
            for p in transcripts.dir.iterdir()
            if ".jsonl" in p.name and (who := transcript_principal(p.name)) is not None
        }
    rows = _index_rows(memory) if memory.store.exists() else {}
    ids |= set(rows)
    out: list[PrincipalSummary] = []
    for who in sorted(ids):
        files = [p for p in _folder_files(workspace, who) if p.name.lower().endswith(".md")]
        sizes: list[os.stat_result] = []
        for p in files:
            try:
                st = os.lstat(p)
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                sizes.append(st)
        counts = rows.get(who, [0, 0, 0])
        out.append(
            PrincipalSummary(
                principal=who,
                files=len(sizes),
                bytes=sum(st.st_size for st in sizes),
                indexed_files=counts[0],
                chunks=counts[1],
                facts=counts[2],
                transcripts=len(_transcripts(transcripts, who)),
                last_write=max((st.st_mtime for st in sizes), default=None),
            )
        )
    return out


def _transcripts(store: TranscriptStore, who: str) -> list[Path]:
    """``who``'s transcripts, current and rotated, without their ``.lock`` files (which
    ``forget_principal`` removes with them)."""
    return [p for p in store.principal_files(who) if not p.name.endswith(".lock")]


def delete_principal(memory: Memory, principal: str, *, dry_run: bool = False) -> PrincipalDeletion:
    """Delete one principal's memory: its folder, its transcripts and their index rows.

    The folder ``memory/principals/<id>/`` is removed (links themselves, never what they
    point to), then its transcripts and their session bindings, then the index is synced
    so every row derived from them goes, and checked: a row left over raises.

    Raises:
        ConfigError: a bad principal id.
        MemmwError: index rows of the principal remain after the sync.
    """
    who = check_principal_id(principal)
    workspace = Path(memory.workspace)
    transcripts = TranscriptStore(memory.state_dir, memory.agent_id)
    entries = _folder_files(workspace, who)
    rels = tuple(Path(os.path.relpath(p, workspace)).as_posix() for p in entries)
    names = tuple(p.name for p in _transcripts(transcripts, who))
    if dry_run:
        rows = _index_rows(memory).get(who, [0, 0, 0]) if memory.store.exists() else [0, 0, 0]
        return PrincipalDeletion(
            principal=who, files=rels, transcripts=names, remaining=sum(rows), dry_run=True
        )
    for path in entries:
        path.unlink(missing_ok=True)
    root = workspace / principal_dir(who)
    if root.is_dir() and not root.is_symlink():
        for dirpath, _dirs, _files in sorted(os.walk(root), key=lambda t: -len(t[0])):
            os.rmdir(dirpath)
    transcripts.forget_principal(who)
    memory.sync()
    left = _index_rows(memory).get(who, [0, 0, 0])
    if sum(left):
        raise MemmwError(
            f"principal {who}: {left[0]} files, {left[1]} chunks and {left[2]} facts are "
            "still indexed after the sync; run 'memmw index --force' and try again"
        )
    return PrincipalDeletion(
        principal=who, files=rels, transcripts=names, remaining=0, dry_run=False
    )
