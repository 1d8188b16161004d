"""Result and value objects returned by the public API.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from memmw.config import Source

#: The search mode when only the keyword leg answered (BM25 over the stored postings, or
#: FTS5 with ``store.keyword_backend = "fts5"``). Before 0.1 payloads said ``fts-only``
#: whatever the backend.
KEYWORD_ONLY = "keyword-only"


def citation_for(path: str, start_line: int, end_line: int) -> str:
    """``path#L<s>`` for one line, ``path#L<s>-L<e>`` for a range."""
    if start_line == end_line:
        return f"{path}#L{start_line}"
    return f"{path}#L{start_line}-L{end_line}"


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    """One search result: a snippet of a memory file with its position and score.

    Attributes:
        path: Workspace-relative posix path (``sessions/<file>`` for transcripts).
        start_line: First line the snippet shows (1-based).
        end_line: Last line the snippet shows.
        score: How strongly the chunk matches, 0..1, on one scale for every search mode:
            ``1 - (1 - k) * (1 - v)`` where ``k`` is ``text_score`` and ``v``
            ``vector_score`` (0 for a leg that did not find the chunk), each weighted by
            temporal decay and importance (:func:`memmw.search.searcher.evidence`).
            Results come in ranking order, which in hybrid mode is the fusion's: a
            later result can score higher than an earlier one.
        snippet: At most ``snippet_max_chars`` UTF-16 units centred on the best-matching lines.
        source: ``memory`` or ``sessions``.
        citation: ``path#Lx-Ly`` of the lines the snippet shows.
        chunk_id: Stable id of the chunk the snippet came from.
        chunk_start_line: First line of the whole chunk.
        chunk_end_line: Last line of the whole chunk.
        text_score: Keyword evidence, ``tanh`` of the boosted keyword score, 0..1 (None
            when the chunk was not a keyword hit).
        vector_score: Vector evidence, the cosine calibrated against the corpus median,
            0..1 (None when the chunk was not a vector hit).
        importance: ``<!-- importance: N -->`` annotation of the entry, if any.
        namespace: The agent whose index the hit came from, set when shared namespaces
            are searched too (``store.shared``); None otherwise.
        untrusted: The session that searched does not trust the file's text (notes
            written from group sessions, extra paths, transcripts:
            :meth:`memmw.workspace.access.SessionAccess.check`); the payload says
            ``untrusted: true``.
    """

    path: str
    start_line: int
    end_line: int
    score: float
    snippet: str
    source: str = Source.MEMORY
    citation: str = ""
    chunk_id: str = ""
    chunk_start_line: int = 0
    chunk_end_line: int = 0
    text_score: float | None = None
    vector_score: float | None = None
    importance: int | None = None
    namespace: str | None = None
    untrusted: bool = False

    def to_payload(self, *, citations: bool = True) -> dict[str, Any]:
        """The tool/CLI JSON shape (camelCase keys, as the original's tools)."""
        snippet = self.snippet
        if citations:
            snippet = f"{snippet.strip()}\n\nSource: {self.citation}"
        item: dict[str, Any] = {
            "path": self.path,
            "startLine": self.start_line,
            "endLine": self.end_line,
            "score": round(self.score, 6),
            "snippet": snippet,
            "source": self.source,
        }
        if citations:
            item["citation"] = self.citation
        if self.vector_score is not None:
            item["vectorScore"] = round(self.vector_score, 6)
        if self.text_score is not None:
            item["textScore"] = round(self.text_score, 6)
        if self.importance is not None:
            item["importance"] = self.importance
        if self.namespace is not None:
            item["namespace"] = self.namespace
        if self.untrusted:
            item["untrusted"] = True
        return item


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """What one ``Memory.search_result`` call found, and how.

    The ``memory_search`` tool payload and ``memmw search --json`` are rendered from it
    by :func:`memmw.agent.tools.search_payload`.

    Attributes:
        hits: At most ``max_results`` hits, best first.
        mode: ``hybrid`` (keyword and vector legs) or ``keyword-only`` (:data:`KEYWORD_ONLY`:
            the keyword leg alone, whatever its backend; ``fts-only`` before 0.1).
        provider: Id of the embedding provider that answered (``none`` without one).
        model: Its model (``fts-only`` without a provider).
        fallback_from: The provider that failed when a fallback answered, else None.
        fallback_reason: Why it failed.
        warning: Why the vector leg was skipped for this search, if it was.
        partial: True when the vector leg timed out (no query embedding within
            ``remote.query_timeout_s``): the hits are keyword-only and ``warning`` says so.
    """

    hits: list[SearchHit]
    mode: str
    provider: str = "none"
    model: str = "fts-only"
    fallback_from: str | None = None
    fallback_reason: str | None = None
    warning: str | None = None
    partial: bool = False


@dataclass(frozen=True, kw_only=True)
class ReadResult:
    """A window of a memory file returned by ``Memory.get``.

    Attributes:
        path: Normalised workspace-relative path.
        text: The lines of the window (joined with ``\\n``), plus a continuation notice
            when truncated.
        status: ``ok`` or ``not_found`` (a missing file is not an error).
        from_line: First line returned (1-based).
        lines: Number of lines returned.
        total_lines: Lines in the whole file.
        truncated: True when more of the file follows the window.
        next_from: The ``from_line`` that continues after this window.
        namespace: The shared namespace the file was read from (``store.shared``); None
            for this agent's own files.
    """

    path: str
    text: str
    status: str = "ok"
    from_line: int = 1
    lines: int = 0
    total_lines: int = 0
    truncated: bool = False
    next_from: int | None = None
    namespace: str | None = None

    @property
    def past_end(self) -> bool:
        """True when ``from_line`` starts after the file's last line (nothing to show)."""
        return self.status == "ok" and self.from_line > max(self.total_lines, 1)

    def to_payload(self) -> dict[str, Any]:
        """The ``memory_get`` tool payload."""
        if self.status == "not_found":
            found: dict[str, Any] = {"status": "not_found", "text": "", "path": self.path}
            if self.namespace is not None:
                found["namespace"] = self.namespace
            return found
        payload: dict[str, Any] = {
            "status": "ok",
            "text": self.text,
            "path": self.path,
            "from": self.from_line,
            "lines": self.lines,
        }
        if self.namespace is not None:
            payload["namespace"] = self.namespace
        if self.truncated:
            payload["truncated"] = True
            payload["nextFrom"] = self.next_from
        if self.past_end:
            payload["pastEnd"] = True
            payload["totalLines"] = self.total_lines
        return payload


@dataclass(frozen=True, kw_only=True)
class FileIssue:
    """A file, or a line of one, that could not be indexed, and why.

    Attributes:
        path: The file (workspace-relative, or ``sessions/<name>`` for a transcript).
        reason: Why it was skipped.
        line: The skipped line when only that line was left out (the rest of the file is
            indexed); None when the whole file was skipped (the others index).
    """

    path: str
    reason: str
    line: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"path", "reason"}``, plus ``"line"`` for a skipped line."""
        out: dict[str, Any] = {"path": self.path, "reason": self.reason}
        if self.line is not None:
            out["line"] = self.line
        return out


@dataclass(frozen=True, kw_only=True)
class SyncReport:
    """What one ``Memory.sync`` call did.

    Attributes:
        full_rebuild: True when the whole index was rebuilt (forced or identity change).
        reason: Why a full rebuild happened (``forced``, ``no-index``, ``identity:<key>``).
        files_added / files_changed / files_removed / files_unchanged: File counts.
        chunks_indexed: Chunks written in this sync.
        chunks_total: Chunks in the index afterwards.
        embedded: Chunks embedded (vectors written) in this sync.
        issues: Files skipped with their reason.
        seconds: Wall time.
        warning: Why vectors are still pending after a sync that waited for them (the
            provider failed, or did not finish within ``remote.sync_wait_s``), or None.
    """

    full_rebuild: bool = False
    reason: str = ""
    files_added: int = 0
    files_changed: int = 0
    files_removed: int = 0
    files_unchanged: int = 0
    chunks_indexed: int = 0
    chunks_total: int = 0
    embedded: int = 0
    issues: tuple[FileIssue, ...] = ()
    seconds: float = 0.0
    warning: str | None = None

    @property
    def changed(self) -> bool:
        """True when the sync modified the index."""
        return bool(
            self.full_rebuild or self.files_added or self.files_changed or self.files_removed
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain data for JSON output."""
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class Status:
    """A report on one agent's memory index (``memmw status``).

    ``details`` carries nested sections (``fts``, ``vector``, ``provider``, ``cache``,
    ``scan``) that grow with the backends in use.
    """

    agent_id: str
    workspace: str
    db_path: str
    files: int = 0
    chunks: int = 0
    dirty: bool = False
    sources: tuple[str, ...] = (Source.MEMORY,)
    source_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    mode: str = KEYWORD_ONLY
    provider: str = "none"
    model: str = "fts-only"
    last_sync: float | None = None
    issues: tuple[FileIssue, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain data in the camelCase shape of the original's ``status --json``."""
        return {
            "agentId": self.agent_id,
            "workspace": self.workspace,
            "dbPath": self.db_path,
            "files": self.files,
            "chunks": self.chunks,
            "dirty": self.dirty,
            "sources": list(self.sources),
            "sourceCounts": self.source_counts,
            "provider": self.provider,
            "model": self.model,
            "lastSync": self.last_sync,
            "custom": {"searchMode": self.mode},
            "scan": {"issues": [i.to_dict() for i in self.issues]},
            **self.details,
        }
