"""The graph side of one agent's memory: cached snapshot, fact search, activation, forget."""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import logging
import re
import threading
import time
import unicodedata
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.config import FACT_MATCH_THRESHOLD, FACT_SEARCH_MAX_RESULTS, ExtraPath, Source
from memmw.errors import (
    FileBusyError,
    ForgetError,
    IndexBusyError,
    IndexStoreError,
    MemmwError,
    NoteEditError,
    PathPolicyError,
)
from memmw.graph.model import Graph, load_graph
from memmw.graph.search import FactHit, search_facts
from memmw.graph.telemetry import TelemetryLog, recall_fields
from memmw.notes.syntax import normalize_key, normalize_name, retract_line
from memmw.store.protocol import GraphRows, Store
from memmw.types import SearchHit
from memmw.workspace.files import LineEdit, resolve_read_path, write_note

log = logging.getLogger(__name__)

#: Activation added when an entry is injected or returned by the fact search.
ACCESS_BOOST = 0.5
#: Activation added when a memory_search hit shows the entry's line.
SEARCH_HIT_BOOST = 0.25
#: How long an activation write waits for a running sync before it is retried later.
ACTIVATION_BUSY_MS = 100
_CITATION = re.compile(r"^(?P<path>.+?)#L(?P<line>\d+)(?:-L?(?P<last>\d+))?$")


@dataclass(frozen=True, kw_only=True)
class ForgetResult:
    """What :meth:`GraphEngine.forget` changed.

    Attributes:
        retracted: Citations (``path#L<line>``) of the entries now struck through.
        reason: The reason written into the annotation.
    """

    retracted: tuple[str, ...]
    reason: str

    def to_payload(self) -> dict[str, Any]:
        """The ``memory_forget`` tool payload."""
        return {"retracted": list(self.retracted), "reason": self.reason}


class GraphEngine:
    """Reads and updates the graph of one index.

    Args:
        store: The index (graph rows are read and activation written through it).
        open_store: Makes the store's read side current (called with ``lock`` held).
        lock: The caller's lock around reads.
        ensure_index: Called before reading (builds the index when there is none).
        workspace: The workspace root (for ``forget``).
        extra_paths: Configured extra paths (the read path policy).
        telemetry: Where events are logged.
    """

    def __init__(
        self,
        *,
        store: Store,
        open_store: Callable[[], None],
        lock: threading.RLock,
        ensure_index: Callable[[], None],
        workspace: Path,
        extra_paths: Sequence[ExtraPath],
        telemetry: TelemetryLog,
    ) -> None:
        self.store = store
        self._open_store = open_store
        self._lock = lock
        self._ensure_index = ensure_index
        self.workspace = workspace
        self.extra_paths = tuple(extra_paths)
        self.telemetry = telemetry
        self._cache: tuple[tuple[str, str], Graph] | None = None
        self._rows: GraphRows | None = None
        self._views: dict[frozenset[str], Graph] = {}
        self._paths: frozenset[str] = frozenset()
        self._pending: dict[str, float] = {}
        self._pending_lock = threading.Lock()
        #: False once the index refused a write (read-only state): activation stays in memory.
        self._can_write = True

    # -- snapshot ------------------------------------------------------------------------
    def graph(self) -> Graph:
        """The current graph (re-read when the index generation changed)."""
        self._ensure_index()
        with self._lock:
            self._open_store()
            with self.store.read() as reader:
                stamp = (reader.get_meta("generation") or "", reader.get_meta("epoch") or "")
                if self._cache is not None and self._cache[0] == stamp:
                    return self._cache[1]
                rows = reader.graph_rows()
                graph = load_graph(rows)
        with self._pending_lock:
            for key, amount in self._pending.items():  # bumps not written yet
                graph.activation[key] = graph.activation_of(key) + amount
        self._cache = (stamp, graph)
        self._rows = rows
        self._views = {}
        paths = {str(r[3]) for r in rows.entities} | {str(r[6]) for r in rows.facts}
        paths |= {str(r[6]) for r in rows.relations} | {str(r[0]) for r in rows.triggers}
        paths |= {str(r[2]) for r in rows.aliases if len(r) > 2}
        self._paths = frozenset(paths)
        return graph

    def view(self, visible: Callable[[str], bool] | None) -> Graph:
        """The graph as a session sees it: only rows of the files ``visible`` accepts.

        ``visible`` is a session's privacy gate (``SessionAccess.may_read`` or
        ``injectable``); it is asked about every indexed path on every call (files and
        links change without the index changing), and views of the same set of paths
        are reused. Activation is shared with the full graph.
        """
        graph = self.graph()
        rows = self._rows
        if visible is None or rows is None:
            return graph
        paths = self._paths
        allowed = frozenset(p for p in paths if visible(p))
        if allowed == paths:
            return graph
        cached = self._views.get(allowed)
        if cached is None:
            cached = load_graph(rows, allowed.__contains__)
            cached.activation = graph.activation
            cached.last_access = graph.last_access
            if len(self._views) >= 16:
                self._views.clear()
            self._views[allowed] = cached
        return cached

    # -- search --------------------------------------------------------------------------
    def facts(
        self,
        query: str,
        *,
        max_results: int = FACT_SEARCH_MAX_RESULTS,
        threshold: float = FACT_MATCH_THRESHOLD,
        include_history: bool | None = None,
        include_private: bool = True,
        now: float | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> list[FactHit]:
        """Four-phase fact search; returned entries gain activation.

        ``visible`` (a session's privacy gate) restricts it to :meth:`view`.
        """
        started = time.perf_counter()
        if not isinstance(query, str) or not query.strip():
            return []
        hits = search_facts(
            self.view(visible),
            query,
            max_results=max_results,
            threshold=threshold,
            include_history=include_history,
            include_private=include_private,
            now=now,
        )
        self.touch([h.stable_key for h in hits] + [f"e:{h.entity_key}" for h in hits])
        self.telemetry.record(
            "facts", ms=round((time.perf_counter() - started) * 1000, 3), hits=len(hits)
        )
        return hits

    # -- activation ----------------------------------------------------------------------
    def touch(self, keys: Iterable[str], amount: float = ACCESS_BOOST) -> None:
        """Raise the activation of accessed entries (written now, or with the next try)."""
        keys = list(dict.fromkeys(keys))
        if not keys:
            return
        with self._pending_lock:
            for key in keys:
                self._pending[key] = self._pending.get(key, 0.0) + amount
            pending = dict(self._pending)
        if self._cache is not None:
            for key in keys:
                graph = self._cache[1]
                graph.activation[key] = graph.activation_of(key) + amount
                graph.last_access[key] = time.time()
        self.flush_activation(pending)

    def flush_activation(self, pending: dict[str, float] | None = None) -> bool:
        """Write buffered activation bumps; False (kept for later) when the index is busy."""
        with self._pending_lock:
            pending = dict(self._pending) if pending is None else pending
        if not pending or not self._can_write or not self.store.exists():
            return False
        try:
            with (
                self.store.write(
                    timeout=ACTIVATION_BUSY_MS / 1000, what="activation", exclusive=False
                ) as writer,
                writer.transaction(),
            ):
                by_amount: dict[float, list[str]] = {}
                for key, amount in pending.items():
                    by_amount.setdefault(amount, []).append(key)
                for amount, keys in by_amount.items():
                    writer.bump_activation(keys, amount)
        except IndexBusyError as exc:  # a sync is writing: retry later
            log.debug("activation write deferred: %s", exc)
            return False
        except IndexStoreError as exc:  # read-only or damaged: keep it in memory
            log.info("activation not persisted (%s); kept in memory", exc)
            self._can_write = False
            return False
        with self._pending_lock:
            for key, amount in pending.items():
                left = self._pending.get(key, 0.0) - amount
                if left > 1e-9:
                    self._pending[key] = left
                else:
                    self._pending.pop(key, None)
        return True

    def on_search(self, hits: Sequence[SearchHit], ms: float, query: str) -> None:
        """A ``memory_search`` ran: log it and raise the activation of the facts it showed."""
        self.telemetry.record(
            "search", ms=round(ms, 3), hits=len(hits), chars=len(query), **recall_fields(hits, query)
        )
        if not hits or self._cache is None:
            return  # no graph loaded in this process yet: nothing cheap to map hits to
        graph = self._cache[1]
        shown: dict[str, list[tuple[int, int]]] = {}
        for hit in hits:
            shown.setdefault(hit.path, []).append((hit.start_line, hit.end_line))
        entries: list[tuple[str, int, str]] = [(f.path, f.line, f.stable_key) for f in graph.facts]
        entries.extend((r.path, r.line, r.stable_key) for r in graph.relations)
        keys = [
            key
            for path, line, key in entries
            if any(a <= line <= b for a, b in shown.get(path, ()))
        ]
        self.touch(keys, SEARCH_HIT_BOOST)

    # -- forget --------------------------------------------------------------------------
    def forget(
        self,
        citation: str | None = None,
        *,
        entity: str | None = None,
        key: str | None = None,
        reason: str = "",
        expect: str | None = None,
        today: dt.date | None = None,
        visible: Callable[[str], bool] | None = None,
    ) -> ForgetResult:
        """Retract entries in the Markdown: struck through with a visible annotation.

        ``visible`` is the session's privacy gate: only lines of files it may read are
        retracted (another person's memory is never touched).

        Either a ``citation`` (``path#L<line>``) or an ``entity`` and ``key`` (every value of
        that fact) names what to retract. Nothing is deleted; search and facts skip
        retracted entries after the next sync. The line is rewritten through
        :func:`memmw.workspace.files.write_note` (the note's lock, no lost append, every
        other byte kept).

        What was cited must still be there: with ``expect`` (the entry's text as the
        caller saw it) the line must contain it; without, the note must still start with
        the bytes the index read (appends since are fine), since the index is where
        citations come from. Otherwise the retraction is refused and nothing changes.

        Raises:
            ForgetError: nothing matches, the line is not a list entry, or the cited line
                no longer holds what was cited.
            memmw.errors.PathPolicyError: the path is not a memory file.
        """
        day = (today or dt.date.today()).isoformat()
        targets: list[tuple[str, int]] = []
        if expect is not None and not expect.strip():
            raise ForgetError("expect is empty; give the entry's text as you saw it, or omit it")
        if expect is not None and not citation:
            raise ForgetError("expect goes with a citation: the text of the entry at path#L12")
        if citation:
            m = _CITATION.match(citation.strip())
            if not m:
                raise ForgetError(f"citation must look like path#L12; got {citation!r}")
            line = int(m.group("line"))
            last = m.group("last")
            if last is not None and int(last) != line:
                raise ForgetError(
                    f"{citation.strip()} names lines {line} to {last}; cite the one entry to "
                    f"retract (for example {m.group('path')}#L{line})"
                )
            if line < 1:
                raise ForgetError(f"{citation.strip()}: line numbers start at 1")
            targets.append((m.group("path"), line))
        elif entity and key:
            targets.extend(self._fact_lines(entity, key))
        elif entity or key:
            raise ForgetError("an entity needs a key, and a key an entity (both name a fact)")
        else:
            raise ForgetError("give a citation (path#L12), or an entity and a key")
        if visible is not None:
            hidden = [path for path, _line in targets if not visible(path)]
            if citation and hidden:
                raise ForgetError(f"{hidden[0]} is not readable from this session")
            targets = [(path, line) for path, line in targets if visible(path)]
            if not targets:
                raise ForgetError(f"no fact {key!r} of {entity!r} to retract")
        indexed = self._indexed_files()
        done: list[str] = []
        for path, lines in _group(targets).items():
            rel, abs_path = resolve_read_path(self.workspace, path, self.extra_paths)
            if not abs_path.exists():
                raise ForgetError(f"{rel}: no such memory file")
            if not abs_path.is_file():
                raise ForgetError(f"{rel}: not a regular file")
            record = indexed.get(rel) if expect is None else None
            edits = [
                LineEdit(line, functools.partial(_retract, day=day, reason=reason, expect=expect))
                for line in lines
            ]
            try:
                write_note(
                    abs_path,
                    edits=edits,
                    indexed_prefix=(record[2], record[0]) if record is not None else None,
                )
            except NoteEditError as exc:
                raise ForgetError(_forget_message(rel, str(exc), abs_path.name)) from exc
            except PathPolicyError:
                raise
            except OSError as exc:  # busy, vanished, read-only...: never the absolute path
                why = str(exc) if isinstance(exc, FileBusyError) else exc.strerror
                raise ForgetError(
                    f"{rel}: could not be written ({why or type(exc).__name__}); nothing in it"
                    " was retracted"
                ) from exc
            done.extend(f"{rel}#L{line}" for line in lines)
        log.info("retracted %s", ", ".join(done))
        return ForgetResult(retracted=tuple(done), reason=reason)

    def _fact_lines(self, entity: str, key: str) -> list[tuple[str, int]]:
        """Lines of every current value of ``key`` of ``entity``; errors say what is missing."""
        graph = self.graph()
        ent = graph.names.get(normalize_name(entity)) or normalize_name(entity)
        facts = graph.facts_of(ent)
        if not facts and ent not in graph.entities:
            raise ForgetError(f"no entity named {entity!r} in memory (memmw facts lists them)")
        want = normalize_key(key)
        same_key = [f for f in facts if f.key_norm == want]
        if not same_key:
            keys = sorted({f.key for f in facts if not f.retracted})
            known = f" (its facts: {', '.join(keys)})" if keys else ""
            raise ForgetError(f"{entity!r} has no fact {key!r}{known}")
        live = [(f.path, f.line) for f in same_key if not f.retracted]
        if not live:
            raise ForgetError(f"every {key!r} fact of {entity!r} is already retracted")
        return live

    def _indexed_files(self) -> dict[str, tuple[str, float, int]]:
        """``{path: (sha256, mtime, size)}`` of the notes as the index read them."""
        if not self.store.exists():
            return {}
        try:
            with self._lock:
                self._open_store()
                with self.store.read() as reader:
                    return reader.file_records(Source.MEMORY)
        except MemmwError as exc:  # no index to compare with: the line is taken as is
            log.debug("forget: no indexed file records (%s)", exc)
            return {}

    def close(self) -> None:
        """Write what activation is still buffered."""
        with contextlib.suppress(Exception):
            self.flush_activation()


def _group(targets: Iterable[tuple[str, int]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for path, line in targets:
        if line not in out.setdefault(path, []):
            out[path].append(line)
    return out


def _squash(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _retract(line: str, *, day: str, reason: str, expect: str | None) -> str:
    """The retracted form of ``line`` (a :class:`LineEdit` change); refuses a changed line."""
    if expect is not None:
        want = _squash(expect)
        for marker in ("- ", "* ", "+ "):
            want = want.removeprefix(marker.strip() + " ")
        if want not in _squash(line):
            shown = line if len(line) <= 120 else line[:117] + "..."
            raise ValueError(
                f"the line no longer holds the cited entry {expect!r}; it reads {shown!r}"
                " (search again and cite the entry's current line)"
            )
    return retract_line(line, day=day, reason=reason)


def _forget_message(rel: str, message: str, name: str) -> str:
    """A :class:`NoteEditError` message with the note's workspace path and forget's advice."""
    if message.startswith(name):
        message = rel + message[len(name) :]
    if "changed since it was indexed" in message:
        message += (
            "; pass the entry's text as expect (memmw forget --expect TEXT) or search again"
            " and use the new citation"
        )
    return message
