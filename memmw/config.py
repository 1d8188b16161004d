"""Configuration: frozen keyword-only dataclasses with the reference defaults, plus loaders.

Internal module: import its public names from ``memmw``.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import re
import sys
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar, Union, get_args, get_origin

from memmw.chat_type import check_principal_id
from memmw.errors import ConfigError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

CONFIG_FILE_NAME = "memmw.toml"
#: Agent ids and namespaces (``Memory(agent_id=...)``, ``--agent``, ``store.shared``): an
#: ASCII letter or digit, then up to 127 letters, digits, ``.``, ``_`` or ``-``. They name
#: files and PostgreSQL namespaces, so nothing else (no newline, no ``/``) is allowed.
AGENT_ID_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")


def check_agent_id(value: object, what: str = "agent_id") -> str:
    """Return ``value`` when it is a valid agent id or namespace (:data:`AGENT_ID_PATTERN`).

    Raises:
        ConfigError: naming ``what`` and the allowed characters.
    """
    if not isinstance(value, str) or AGENT_ID_PATTERN.fullmatch(value) is None:
        raise ConfigError(
            f"{what} must be 1-128 characters: a letter or digit, then letters, digits, '.',"
            f" '_' or '-' (no spaces, slashes or line breaks); got {value!r}"
        )
    return value


ENV_PREFIX = "MEMMW__"



class Source(str, enum.Enum):
    """An index source: what the chunks of an index were read from.

    The values are the strings of the config (``sources = ["memory", "sessions"]``, as
    OpenClaw spells them), of the ``source`` column of every index and of the hits'
    ``source`` field: a member equals, hashes and prints as its value, so nothing on disk
    or on the wire changes. Three things are called "session" around memmw; only one is
    a source (docs/architecture.md, "Words"):

    * :attr:`TRANSCRIPTS` (``"sessions"``): the transcript corpus, the JSONL transcripts
      of past chat sessions indexed for search;
    * a *chat session* (a session key, its privacy gate) is not a source;
    * a *session archive* (``memory/YYYY-MM-DD-<slug>.md``, written on ``/new``) is a
      note of :attr:`MEMORY`.
    """

    #: The Markdown notes of the workspace (and extra paths).
    MEMORY = "memory"
    #: The chat transcripts (``<state>/agents/<id>/sessions/*.jsonl``).
    TRANSCRIPTS = "sessions"

    def __str__(self) -> str:
        return str(self.value)

    def __format__(self, spec: str) -> str:
        return format(str(self.value), spec)

    @classmethod
    def parse(cls, value: object, what: str = "sources entries") -> Source:
        """``value`` as a source.

        Raises:
            ConfigError: ``value`` names no source.
        """
        try:
            return cls(value)
        except ValueError:
            allowed = " or ".join(repr(s.value) for s in cls)
            raise ConfigError(f"{what} must be {allowed}; got {value!r}") from None


#: ``store.backend`` of the store kept in this process (``store/inmemory``).
IN_MEMORY_STORE = "memory"
#: ``store.keyword_backend`` that scores BM25 in process over the postings the index stores.
POSTINGS_KEYWORD_BACKEND = "memory"
#: The table of a config file its settings may sit under (``[memory]``).
CONFIG_TABLE = "memory"

Citations = Literal["auto", "on", "off"]
DmScope = Literal["main", "per-peer"]
FtsTokenizer = Literal["unicode61", "trigram"]
KeywordBackend = Literal["auto", "memory", "fts5"]
StoreBackend = Literal["sqlite", "postgres", "memory"]
VectorBackend = Literal["auto", "sqlite-vec", "numpy"]
Fusion = Literal["normalized", "weighted", "rrf"]
DecayMode = Literal["bounded", "classic"]
DecayReference = Literal["newest", "now"]


class _Section:
    """Shared validation for config sections (Literal membership, ranges)."""

    _section: ClassVar[str] = ""

    def _key(self, name: str) -> str:
        return f"{self._section}.{name}" if self._section else name

    def _validate_literals(self) -> None:
        hints = typing.get_type_hints(type(self))
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            allowed = _literal_values(hints[f.name])
            value = getattr(self, f.name)
            if allowed is not None and value not in allowed and value is not None:
                raise ConfigError(
                    f"{self._key(f.name)} must be one of {', '.join(map(repr, allowed))}; "
                    f"got {value!r}"
                )

    def _int_range(self, name: str, lo: int | None = None, hi: int | None = None) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{self._key(name)} must be an integer; got {value!r}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(f"{self._key(name)} must be in {_range_text(lo, hi)}; got {value}")

    def _float_range(self, name: str, lo: float | None = None, hi: float | None = None) -> None:
        value = getattr(self, name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{self._key(name)} must be a number; got {value!r}")
        if value != value or (lo is not None and value < lo) or (hi is not None and value > hi):
            raise ConfigError(f"{self._key(name)} must be in {_range_text(lo, hi)}; got {value}")
        object.__setattr__(self, name, float(value))

    def to_dict(self) -> dict[str, Any]:
        """Return the section as plain JSON-compatible data."""
        return _to_plain(self)  # type: ignore[no-any-return]


def _range_text(lo: float | None, hi: float | None) -> str:
    if lo is not None and hi is not None:
        return f"[{lo}, {hi}]"
    return f">= {lo}" if lo is not None else f"<= {hi}"


def _literal_values(tp: Any) -> tuple[Any, ...] | None:
    if get_origin(tp) is Literal:
        return get_args(tp)
    if get_origin(tp) in (Union, types.UnionType):
        for arg in get_args(tp):
            values = _literal_values(arg)
            if values is not None:
                return values
    return None


def _to_plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _to_plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, Mapping):
        return {str(k): _to_plain(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [_to_plain(v) for v in value]
    if isinstance(value, enum.Enum):
        return value.value
    return value


@dataclass(frozen=True, kw_only=True)
class ExtraPath(_Section):
    """An extra file or directory to index, optionally filtered by a glob.

    Attributes:
        path: Absolute, ``~``-prefixed or workspace-relative path.
        pattern: Optional glob matched against paths relative to ``path`` (posix form).
    """

    _section: ClassVar[str] = "extra_paths"
    path: str
    pattern: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path.strip():
            raise ConfigError("extra_paths entries need a non-empty 'path'")
        object.__setattr__(self, "path", self.path.strip())
        if self.pattern is not None and not str(self.pattern).strip():
            object.__setattr__(self, "pattern", None)


@dataclass(frozen=True, kw_only=True)
class ChunkingConfig(_Section):
    """Line-based chunking: ``tokens`` per chunk (4 weighted chars each), ``overlap`` carried."""

    _section: ClassVar[str] = "chunking"
    tokens: int = 400
    overlap: int = 80

    def __post_init__(self) -> None:
        self._int_range("tokens", 1)
        self._int_range("overlap", 0)
        # The reference clamps the overlap below the chunk size rather than failing.
        object.__setattr__(self, "overlap", min(self.overlap, self.tokens - 1))


@dataclass(frozen=True, kw_only=True)
class StoreConfig(_Section):
    """Where the derived index lives and which search backends it uses.

    Attributes:
        path: Index file; ``{agentId}`` is replaced. Default ``<state_dir>/memory/<agent>.sqlite``.
        fts_tokenizer: FTS5 tokenizer of the ``chunks_fts`` table.
        keyword_backend: ``memory`` scores BM25 in process over the postings the index
            stores (fast at scale, from a process's first query), ``fts5`` asks SQLite
            (its table is only filled for this backend); ``auto`` picks ``memory``.
        vector_enabled: Store and search vectors when a provider is active.
        vector_backend: ``sqlite-vec`` (needs an extension-capable sqlite module), ``numpy``,
            or ``auto`` (numpy brute force; it measured faster than a vec0 scan here).
        backend: ``sqlite`` (one file per agent), ``postgres`` (every agent a namespace
            of one PostgreSQL + pgvector database; needs the ``postgres`` extra) or
            ``memory`` (an index in this process only, rebuilt by each new process; the
            agents of one state folder share it; no ``fts5`` keyword backend).
        dsn: PostgreSQL connection string for ``backend = "postgres"``; when unset,
            ``$MEMMW_STORE_DSN``. Keep passwords out of config files (``~/.pgpass``).
        shared: Namespaces (agent ids) searched alongside this agent's own index, read
            only, with hits labelled by namespace: for example a team folder indexed by
            the agent ``team`` on whichever host owns it. With SQLite they are other
            agents' files in the same state folder; with PostgreSQL, namespaces of the
            same database.
    """

    _section: ClassVar[str] = "store"
    path: str | None = None
    backend: StoreBackend = "sqlite"
    dsn: str | None = None
    shared: tuple[str, ...] = ()
    fts_tokenizer: FtsTokenizer = "unicode61"
    keyword_backend: KeywordBackend = "auto"
    vector_enabled: bool = True
    vector_backend: VectorBackend = "auto"

    def __post_init__(self) -> None:
        self._validate_literals()
        if self.backend == IN_MEMORY_STORE and self.keyword_backend == "fts5":
            raise ConfigError(
                "store.keyword_backend = 'fts5' needs a full-text index; the in-memory store"
                " has none (use 'memory' or 'auto')"
            )
        shared = tuple(dict.fromkeys(self.shared))
        for name in shared:
            check_agent_id(name, "store.shared entries")
        object.__setattr__(self, "shared", shared)

    def __repr__(self) -> str:
        # The DSN may hold a password: a repr lands in logs, tracebacks and bug reports.
        from memmw.redaction import mask_dsn

        shown = ", ".join(
            f"{f.name}={(mask_dsn(self.dsn) if f.name == 'dsn' else getattr(self, f.name))!r}"
            for f in dataclasses.fields(self)
            if f.repr
        )
        return f"StoreConfig({shown})"


@dataclass(frozen=True, kw_only=True)
class HybridConfig(_Section):
    """How the keyword and vector legs are merged.

    Attributes:
        enabled: Merge both legs (the reference's default). False: vector hits only while
            vectors answer; keyword hits when they cannot (no provider, or it failed).
        vector_weight: Weight of the vector leg (pair normalised to sum 1). The original
            uses 0.7/0.3 on raw scores; with both legs rescaled, equal weights are the
            neutral choice (measured on LoCoMo: 0.7/0.3 falls below keyword-only with the
            offline model, 0.5/0.5 beats it).
        text_weight: Weight of the keyword leg.
        candidate_multiplier: Candidates per leg = ``max_results * multiplier``.
        max_candidates: Cap of candidates per leg.
        fusion: ``normalized`` (default): every candidate is scored on both legs, each
            leg is min-max normalised over the candidates, then weighted. ``weighted``:
            the original's weighted sum of raw scores (the boosted keyword score saturates
            at 1, so cosine decides the order). ``rrf``: weighted reciprocal-rank fusion.
        rrf_k: The RRF constant.
        calibrate_vectors: Report vector scores relative to the query's median cosine
            over the corpus (``(cos - median) / (1 - median)``) instead of raw cosine, so
            ``min_score`` filters unrelated chunks whatever the model's cosine range
            (numpy vector backend; sqlite-vec reports raw cosine).
    """

    _section: ClassVar[str] = "query.hybrid"
    enabled: bool = True
    vector_weight: float = 0.5
    text_weight: float = 0.5
    candidate_multiplier: int = 4
    max_candidates: int = 200
    fusion: Fusion = "normalized"
    rrf_k: int = 60
    calibrate_vectors: bool = True

    @classmethod
    def classic(cls) -> HybridConfig:
        """The original merge: 0.7 * cosine + 0.3 * keyword score, on raw scores."""
        return cls(fusion="weighted", vector_weight=0.7, text_weight=0.3, calibrate_vectors=False)

    def __post_init__(self) -> None:
        self._validate_literals()
        self._float_range("vector_weight", 0.0, 1.0)
        self._float_range("text_weight", 0.0, 1.0)
        self._int_range("candidate_multiplier", 1, 20)
        self._int_range("max_candidates", 1, 10000)
        self._int_range("rrf_k", 1, 10000)
        total = self.vector_weight + self.text_weight
        if total <= 0:
            vw, tw = 0.7, 0.3
        else:
            vw, tw = self.vector_weight / total, self.text_weight / total
        object.__setattr__(self, "vector_weight", vw)
        object.__setattr__(self, "text_weight", tw)


@dataclass(frozen=True, kw_only=True)
class MMRConfig(_Section):
    """Maximal marginal relevance re-ranking (``lambda_`` = 1 is a plain sort)."""

    _section: ClassVar[str] = "query.mmr"
    enabled: bool = True
    lambda_: float = 0.7

    def __post_init__(self) -> None:
        self._float_range("lambda_", 0.0, 1.0)


@dataclass(frozen=True, kw_only=True)
class TemporalDecayConfig(_Section):
    """Down-weighting of dated memories.

    Attributes:
        enabled: Apply decay at all.
        half_life_days: Age at which the decaying part of the score halves.
        mode: ``bounded`` (default): ``floor + (1 - floor) * 2**(-age/half_life)``, so age can
            cost at most ``1 - floor`` of a score and relevance still decides. ``classic``:
            the original ``2**(-age/half_life)``.
        reference: ``newest`` measures age against the newest dated memory in the index (a
            workspace left alone for a year is not all "old"); ``now`` against the clock.
        floor: Lower bound of the multiplier in ``bounded`` mode.
    """

    _section: ClassVar[str] = "query.temporal_decay"
    enabled: bool = True
    half_life_days: float = 30.0
    mode: DecayMode = "bounded"
    reference: DecayReference = "newest"
    floor: float = 0.85

    def __post_init__(self) -> None:
        self._validate_literals()
        self._float_range("half_life_days", 1.0)
        self._float_range("floor", 0.0, 1.0)

    @classmethod
    def classic(cls) -> TemporalDecayConfig:
        """The original OpenClaw formula: exponential decay against the clock."""
        return cls(mode="classic", reference="now", floor=0.0)


@dataclass(frozen=True, kw_only=True)
class QueryConfig(_Section):
    """Search defaults: result count, threshold, merge, diversity and decay."""

    _section: ClassVar[str] = "query"
    max_results: int = 6
    min_score: float = 0.35
    snippet_max_chars: int = 700
    hybrid: HybridConfig = field(default_factory=HybridConfig)
    mmr: MMRConfig = field(default_factory=MMRConfig)
    temporal_decay: TemporalDecayConfig = field(default_factory=TemporalDecayConfig)

    def __post_init__(self) -> None:
        self._int_range("max_results", 1, 1000)
        self._float_range("min_score", 0.0, 1.0)
        self._int_range("snippet_max_chars", 80, 100000)

    @property
    def candidates(self) -> int:
        """Candidates per leg: ``min(max_candidates, max_results * candidate_multiplier)``."""
        return candidate_count(self.max_results, self.hybrid)

    def results_wanted(self, max_results: int | None) -> int:
        """How many results a search returns: ``max_results``, else ``self.max_results``.

        The one place a per-search result count is defaulted and checked.

        Raises:
            ConfigError: ``max_results`` is below 1.
        """
        if max_results is None:
            return self.max_results
        if max_results < 1:
            raise ConfigError(f"max_results (maxResults) must be >= 1; got {max_results}")
        return max_results

    def check_min_score(self, min_score: float | None) -> float | None:
        """A per-search ``min_score`` after checking it (None keeps the default threshold).

        The one place a per-search threshold is checked.

        Raises:
            ConfigError: ``min_score`` is outside 0..1.
        """
        if min_score is not None and not 0.0 <= min_score <= 1.0:
            raise ConfigError(
                f"min_score (minScore) must be between 0 and 1; got {min_score:g}"
            )
        return min_score


def candidate_count(max_results: int, hybrid: HybridConfig) -> int:
    """Candidates fetched per search leg for ``max_results`` results."""
    return min(hybrid.max_candidates, max(1, max_results * hybrid.candidate_multiplier))


@dataclass(frozen=True, kw_only=True)
class SessionSyncConfig(_Section):
    """When grown session transcripts are re-indexed."""

    _section: ClassVar[str] = "sync.sessions"
    delta_bytes: int = 100_000
    delta_messages: int = 50
    post_compaction_force: bool = True

    def __post_init__(self) -> None:
        self._int_range("delta_bytes", 0)
        self._int_range("delta_messages", 0)


@dataclass(frozen=True, kw_only=True)
class SyncConfig(_Section):
    """Freshness triggers of the index."""

    _section: ClassVar[str] = "sync"
    on_session_start: bool = True
    on_search: bool = True
    watch: bool = True
    watch_debounce_ms: int = 1500
    interval_minutes: float = 0.0
    sessions: SessionSyncConfig = field(default_factory=SessionSyncConfig)

    def __post_init__(self) -> None:
        self._int_range("watch_debounce_ms", 0, 600_000)
        self._float_range("interval_minutes", 0.0)


@dataclass(frozen=True, kw_only=True)
class CacheConfig(_Section):
    """The embedding cache (keyed by provider identity and chunk hash)."""

    _section: ClassVar[str] = "cache"
    enabled: bool = True
    max_entries: int = 50_000

    def __post_init__(self) -> None:
        self._int_range("max_entries", 1)


@dataclass(frozen=True, kw_only=True)
class BatchConfig(_Section):
    """Provider batch APIs for large backfills (off by default, as the original)."""

    _section: ClassVar[str] = "remote.batch"
    enabled: bool = False
    wait: bool = True
    concurrency: int = 2
    poll_interval_ms: int = 2000
    timeout_minutes: float = 60.0

    def __post_init__(self) -> None:
        self._int_range("concurrency", 1, 64)
        self._int_range("poll_interval_ms", 1)
        self._float_range("timeout_minutes", 0.0)


@dataclass(frozen=True, kw_only=True)
class RemoteConfig(_Section):
    """Remote embedding endpoint settings (OpenAI-compatible or Gemini).

    Attributes:
        base_url: Endpoint override (OpenAI-compatible servers, proxies).
        api_key: Key; when unset the provider reads its environment variable.
        headers: Extra HTTP headers sent with every request.
        dimensions: Requested output dimensionality (Gemini, OpenAI v3 models).
        timeout_s: Per-request timeout. A request that times out is retried only if the
            provider answered another request meanwhile, so a provider that answers
            nothing stops an embedding run (``memmw index``) after about one
            ``timeout_s``; rate limits, 5xx and connection errors keep their retries.
        query_timeout_s: Longest a search waits for its query embedding; past it the
            search answers keyword-only (``partial``, with a warning) and the late
            embedding, if it comes, serves the next identical query.
        sync_wait_s: Longest ``Memory.sync()`` waits for new chunks' vectors; past it the
            sync returns, the chunks stay keyword-searchable (pending) and embedding
            goes on in the background.
        non_batch_concurrency: Parallel requests outside the batch APIs.
    """

    _section: ClassVar[str] = "remote"
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    dimensions: int | None = None
    timeout_s: float = 60.0
    query_timeout_s: float = 3.0
    sync_wait_s: float = 10.0
    non_batch_concurrency: int = 4
    batch: BatchConfig = field(default_factory=BatchConfig)

    def __post_init__(self) -> None:
        if self.dimensions is not None:
            self._int_range("dimensions", 1, 65536)
        self._float_range("timeout_s", 0.001)
        self._float_range("query_timeout_s", 0.001)
        self._float_range("sync_wait_s", 0.0)
        self._int_range("non_batch_concurrency", 1, 64)
        object.__setattr__(self, "headers", dict(self.headers))

    def __repr__(self) -> str:
        # Header values (Authorization, api-key) and URL passwords are credentials: a
        # repr lands in logs, tracebacks and bug reports, so show their names only.
        headers = {k: "***" for k in self.headers}
        return (
            f"RemoteConfig(base_url={_mask_url(self.base_url)!r}, "
            f"api_key={'***' if self.api_key else None!r}, headers={headers!r}, "
            f"dimensions={self.dimensions!r}, timeout_s={self.timeout_s!r}, "
            f"query_timeout_s={self.query_timeout_s!r}, sync_wait_s={self.sync_wait_s!r}, "
            f"non_batch_concurrency={self.non_batch_concurrency!r}, batch={self.batch!r})"
        )


def _mask_url(url: str | None) -> str | None:
    """``url`` with the password of ``user:password@`` and secret query values masked."""
    if not url:
        return url
    from memmw.redaction import mask_dsn

    return mask_dsn(url)


@dataclass(frozen=True, kw_only=True)
class LocalConfig(_Section):
    """The ``local`` provider: a GGUF embedding model run by llama.cpp."""

    _section: ClassVar[str] = "local"
    model_path: str | None = None
    model_cache_dir: str | None = None
    n_ctx: int = 2048
    n_threads: int | None = None

    def __post_init__(self) -> None:
        self._int_range("n_ctx", 16)


@dataclass(frozen=True, kw_only=True)
class ReadConfig(_Section):
    """The ``memory_get`` window."""

    _section: ClassVar[str] = "read"
    max_lines: int = 120
    max_chars: int = 12_000

    def __post_init__(self) -> None:
        self._int_range("max_lines", 1)
        self._int_range("max_chars", 100)


@dataclass(frozen=True, kw_only=True)
class FlushConfig(_Section):
    """The silent pre-compaction memory flush."""

    _section: ClassVar[str] = "flush"
    enabled: bool = True
    soft_threshold_tokens: int = 4000
    reserve_tokens_floor: int = 20_000
    force_flush_transcript_bytes: int = 2 * 1024 * 1024
    context_window: int = 200_000

    def __post_init__(self) -> None:
        self._int_range("soft_threshold_tokens", 0)
        self._int_range("reserve_tokens_floor", 0)
        self._int_range("force_flush_transcript_bytes", 0)
        self._int_range("context_window", 1)


@dataclass(frozen=True, kw_only=True)
class SessionArchiveConfig(_Section):
    """The ``/new`` and ``/reset`` session archive."""

    _section: ClassVar[str] = "session_memory"
    enabled: bool = True
    messages: int = 15
    llm_slug: bool = False
    slug_timeout_s: float = 15.0

    def __post_init__(self) -> None:
        self._int_range("messages", 1)
        self._float_range("slug_timeout_s", 0.0)


@dataclass(frozen=True, kw_only=True)
class BootstrapConfig(_Section):
    """What the session bootstrap injects, and its character budgets."""

    _section: ClassVar[str] = "bootstrap"
    enabled: bool = True
    max_chars_per_file: int = 20_000
    total_max_chars: int = 60_000
    user_max_chars: int = 4000
    daily_days: int = 2

    def __post_init__(self) -> None:
        self._int_range("max_chars_per_file", 64)
        self._int_range("total_max_chars", 64)
        self._int_range("user_max_chars", 64)
        self._int_range("daily_days", 0, 14)


#: Facts a fact search returns by default (``memory_facts``, ``Memory.facts``, the graph).
FACT_SEARCH_MAX_RESULTS = 10
#: Fuzzy entity-matching score (0..100) a name or alias must reach by default
#: (``active_memory.threshold``).
FACT_MATCH_THRESHOLD = 65.0


@dataclass(frozen=True, kw_only=True)
class ActiveMemoryConfig(_Section):
    """Active memory: the fact graph injected before each model call, and working memory.

    Attributes:
        enabled: False turns the ``[GRAPH MEMORY]`` injection off (facts stay searchable).
        threshold: Fuzzy entity-matching score (0..100) a name or alias must reach.
        max_tokens: Token budget of the injected block.
        max_facts: Facts and relations injected per turn at most.
        max_triggers: Trigger-recall entries injected per turn at most (reference: 3).
        deadline_ms: Per-turn time budget; what is found by then is injected.
        group_sessions: Inject in group/channel sessions (never from private files).
        edit_tools: Also offer ``memory_forget`` and ``memory_set_context`` in private,
            writable sessions (off by default: every tool schema costs tokens per call).
        telemetry: Append search/injection latency and hit counts to a JSONL log.
        working_memory: Load ``active-context.md``, ``SOUL.md`` and ``project-*.md``
            into the bootstrap of private sessions.
        active_context_max_chars: Budget of ``active-context.md``.
        soul_max_chars: Budget of ``SOUL.md``.
        project_max_chars: Budget of all project files together.
        project_dir: Shared folder of ``project-<slug>.md`` files (default the workspace).
    """

    _section: ClassVar[str] = "active_memory"
    enabled: bool = True
    threshold: float = FACT_MATCH_THRESHOLD
    max_tokens: int = 400
    max_facts: int = 8
    max_triggers: int = 3
    deadline_ms: int = 150
    group_sessions: bool = True
    edit_tools: bool = False
    telemetry: bool = True
    working_memory: bool = True
    active_context_max_chars: int = 4000
    soul_max_chars: int = 4000
    project_max_chars: int = 8000
    project_dir: str | None = None

    def __post_init__(self) -> None:
        self._float_range("threshold", 0.0, 100.0)
        self._int_range("max_tokens", 16)
        self._int_range("max_facts", 0)
        self._int_range("max_triggers", 0)
        self._int_range("deadline_ms", 1)
        self._int_range("active_context_max_chars", 64)
        self._int_range("soul_max_chars", 64)
        self._int_range("project_max_chars", 64)


@dataclass(frozen=True, kw_only=True)
class ConsolidationConfig(_Section):
    """Consolidation: daily notes flow up into ``active-context.md`` and ``MEMORY.md``.

    Attributes:
        targets: The files a run may change (workspace-relative); ``MEMORY.md`` and
            ``active-context.md`` by default.
        max_change_fraction: At most this fraction of a file's live entries may be
            superseded or merged by one run (at least one).
        min_recalls: Times an entry must have been recalled (shown by a search) to be a
            promotion candidate.
        min_queries: Distinct queries that must have recalled it.
        recency_days: Its last recall must be at most this many days old.
        min_score: Smallest candidate score (0..1).
        max_candidates: Candidates given to the model per run at most.
        provider: Chat provider of the command line: ``none`` (dry runs only),
            ``openai``, ``gemini``, ``openai-compatible`` or ``llama-cpp``.
        model: The chat model's name (or the GGUF file for ``llama-cpp``).
        base_url: Endpoint of an OpenAI-compatible server (default the provider's).
        api_key: Key of the chat provider (default the provider's environment variable).
        timeout_s: Time one model call may take.
        after_archive: Run in the background after a ``/new`` archive (hosts that wire
            :func:`memmw.consolidation.consolidate_after_archive`).
        interval_hours: A long-running host's schedule (0 = no schedule).
    """

    _section: ClassVar[str] = "consolidation"
    targets: tuple[str, ...] = ("MEMORY.md", "active-context.md")
    max_change_fraction: float = 0.25
    min_recalls: int = 3
    min_queries: int = 2
    recency_days: float = 30.0
    min_score: float = 0.5
    max_candidates: int = 40
    provider: str = "none"
    model: str | None = None
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 120.0
    after_archive: bool = False
    interval_hours: float = 0.0

    def __post_init__(self) -> None:
        self._float_range("max_change_fraction", 0.0, 1.0)
        self._int_range("min_recalls", 0)
        self._int_range("min_queries", 0)
        self._float_range("recency_days", 0.0)
        self._float_range("min_score", 0.0, 1.0)
        self._int_range("max_candidates", 1)
        self._float_range("timeout_s", 0.1)
        self._float_range("interval_hours", 0.0)
        if not isinstance(self.provider, str) or self.provider.strip().lower() not in (
            "none",
            "openai",
            "gemini",
            "openai-compatible",
            "llama-cpp",
        ):
            raise ConfigError(
                "consolidation.provider must be one of 'none', 'openai', 'gemini', "
                f"'openai-compatible', 'llama-cpp'; got {self.provider!r}"
            )
        object.__setattr__(self, "provider", self.provider.strip().lower())
        targets = tuple(dict.fromkeys(str(t).strip().replace("\\", "/") for t in self.targets))
        for target in targets:
            if not target.endswith(".md") or target.startswith(("/", "../")) or "/../" in target:
                raise ConfigError(
                    f"consolidation.targets entries must be Markdown files inside the "
                    f"workspace; got {target!r}"
                )
        object.__setattr__(self, "targets", targets)


@dataclass(frozen=True, kw_only=True)
class TracingConfig(_Section):
    """OpenTelemetry spans (the ``otel`` extra; see :mod:`memmw.observability`).

    Attributes:
        capture_query_text: Add the search query, redacted, to ``search_memory`` spans
            (``gen_ai.memory.query.text``). Off by default: spans carry no memory text.
    """

    _section: ClassVar[str] = "tracing"
    capture_query_text: bool = False


@dataclass(frozen=True, kw_only=True)
class MemoryConfig(_Section):
    """Everything configurable about one agent's memory, with the reference defaults.

    Example:
        >>> MemoryConfig(provider="none").provider
        'none'

    Attributes:
        enabled: False disables the tools and search.
        sources: ``memory`` (Markdown files) and optionally ``sessions`` (transcripts).
        extra_paths: More files or directories to index.
        provider: Embedding provider: ``auto``, ``none`` (keyword only), ``offline``,
            ``openai``, ``gemini``, ``local`` or a registered name.
        fallback: Provider used when the primary fails at run time (``none`` = keyword only).
        model: Provider model override.
        citations: Add ``Source: path#Lx-Ly`` to snippets: ``on``, ``off``, or ``auto``
            (direct chats only).
        user_timezone: IANA zone for daily file names; default the host zone.
        auto_reindex: Rebuild automatically when the index identity changes.
        private_chat_types: Chat-type values that mean a private chat (``direct`` always
            does); every other value, and any session key with a group identifier, is a
            group session (fail closed).
        dm_scope: Who a direct session is with when the host does not say (it may pass a
            principal itself): ``main`` (default) keeps every DM the owner's, as before;
            ``per-peer`` makes the peer a DM's session key names (``agent:main:dm:alice``,
            ``agent:main:telegram:dm:7``) its principal, with private memory of its own
            under ``memory/principals/<id>/``.
        owner_principals: Principal ids that are the owner (the owner's own DM peers
            under ``per-peer``): they get the owner's memory.
    """

    _section: ClassVar[str] = ""
    enabled: bool = True
    sources: tuple[Source, ...] = (Source.MEMORY,)
    extra_paths: tuple[ExtraPath, ...] = ()
    provider: str = "auto"
    fallback: str = "none"
    model: str | None = None
    citations: Citations = "auto"
    user_timezone: str | None = None
    auto_reindex: bool = True
    private_chat_types: tuple[str, ...] = ("direct", "dm", "im", "private", "main")
    dm_scope: DmScope = "main"
    owner_principals: tuple[str, ...] = ()
    chunking: ChunkingConfig = field(default_factory=ChunkingConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    query: QueryConfig = field(default_factory=QueryConfig)
    sync: SyncConfig = field(default_factory=SyncConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    remote: RemoteConfig = field(default_factory=RemoteConfig)
    local: LocalConfig = field(default_factory=LocalConfig)
    read: ReadConfig = field(default_factory=ReadConfig)
    flush: FlushConfig = field(default_factory=FlushConfig)
    session_memory: SessionArchiveConfig = field(default_factory=SessionArchiveConfig)
    bootstrap: BootstrapConfig = field(default_factory=BootstrapConfig)
    active_memory: ActiveMemoryConfig = field(default_factory=ActiveMemoryConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    consolidation: ConsolidationConfig = field(default_factory=ConsolidationConfig)

    def __post_init__(self) -> None:
        self._validate_literals()
        sources = tuple(dict.fromkeys(map(Source.parse, self.sources or (Source.MEMORY,))))
        object.__setattr__(self, "sources", sources)
        extras: list[ExtraPath] = []
        seen: set[tuple[str, str | None]] = set()
        for entry in self.extra_paths:
            item = ExtraPath(path=entry) if isinstance(entry, str) else entry
            if not isinstance(item, ExtraPath):
                raise ConfigError(
                    f"extra_paths entries must be strings or ExtraPath; got {entry!r}"
                )
            if (item.path, item.pattern) not in seen:
                seen.add((item.path, item.pattern))
                extras.append(item)
        object.__setattr__(self, "extra_paths", tuple(extras))
        for name in ("provider", "fallback"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{name} must be a provider name such as 'auto' or 'none'")
            object.__setattr__(self, name, value.strip().lower())
        if self.user_timezone is not None:
            _check_timezone(self.user_timezone)
        kinds = []
        for kind in self.private_chat_types:
            if not isinstance(kind, str) or not kind.strip():
                raise ConfigError(
                    f"private_chat_types entries must be non-empty strings; got {kind!r}"
                )
            kinds.append(kind.strip().lower())
        object.__setattr__(self, "private_chat_types", tuple(dict.fromkeys(kinds)))
        owners = [check_principal_id(p, "owner_principals entry") for p in self.owner_principals]
        object.__setattr__(self, "owner_principals", tuple(dict.fromkeys(owners)))

    def replace(self, **changes: Any) -> MemoryConfig:
        """Return a copy with top-level fields replaced (validated again)."""
        return dataclasses.replace(self, **changes)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MemoryConfig:
        """Build a config from plain data (TOML tables, JSON); camelCase keys are accepted."""
        return _build(cls, data, "")

    @classmethod
    def load(
        cls,
        *,
        workspace: str | os.PathLike[str] | None = None,
        config_file: str | os.PathLike[str] | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> MemoryConfig:
        """Load ``memmw.toml`` (explicit file, else the workspace root) and ``MEMMW__*`` vars.

        Environment variables override the file: ``MEMMW__QUERY__MAX_RESULTS=8`` sets
        ``query.max_results``; ``MEMMW_PROVIDER``, ``MEMMW_FALLBACK`` and ``MEMMW_MODEL``
        are short forms. Values are parsed as TOML literals when they can be, else strings.
        """
        data: dict[str, Any] = {}
        path: Path | None = None
        if config_file is not None:
            path = Path(config_file).expanduser()
            if not path.is_file():
                raise ConfigError(f"config file not found: {path}")
        elif workspace is not None:
            candidate = Path(workspace).expanduser() / CONFIG_FILE_NAME
            path = candidate if candidate.is_file() else None
        if path is not None:
            try:
                data = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {path}: {exc}") from exc
            # Allow the settings to sit under a [memory] table as well as at the top level.
            if set(data) == {CONFIG_TABLE} and isinstance(data[CONFIG_TABLE], dict):
                data = data[CONFIG_TABLE]
        _merge_env(data, os.environ if environ is None else environ)
        return cls.from_dict(data)


def _check_timezone(name: str) -> None:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ConfigError(
            f"user_timezone must be an IANA zone such as 'Europe/Paris'; got {name!r}"
        ) from exc


_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")
_ALIASES = {"lambda": "lambda_", "extrapaths": "extra_paths"}


def _snake(key: str) -> str:
    snake = _CAMEL.sub(r"_\1", key).replace("-", "_").lower()
    return _ALIASES.get(snake, snake)


T = TypeVar("T")


def _build(cls: type[T], data: Any, prefix: str) -> T:
    if isinstance(data, cls):
        return data
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'} must be a table; got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}  # type: ignore[arg-type]
    kwargs: dict[str, Any] = {}
    for raw_key, value in data.items():
        key = _snake(str(raw_key))
        dotted = f"{prefix}.{key}" if prefix else key
        if key not in names:
            raise ConfigError(f"unknown config key {dotted!r}; allowed: {', '.join(sorted(names))}")
        kwargs[key] = _coerce(hints[key], value, dotted)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"invalid {prefix or 'config'}: {exc}") from exc


def _coerce(tp: Any, value: Any, key: str) -> Any:
    origin = get_origin(tp)
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return _build(tp, value, key)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if value is None:
            return None
        return _coerce(args[0], value, key) if len(args) == 1 else value
    if origin is tuple:
        if isinstance(value, (str, Mapping)):
            value = [value]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key} must be a list; got {value!r}")
        (item_type, _ellipsis) = get_args(tp)
        if item_type is ExtraPath:
            return tuple(
                ExtraPath(path=v) if isinstance(v, str) else _build(ExtraPath, v, key)
                for v in value
            )
        return tuple(value)
    if tp is bool and isinstance(value, str):
        lowered = value.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ConfigError(f"{key} must be true or false; got {value!r}")
    if tp is bool and not isinstance(value, bool):
        raise ConfigError(f"{key} must be true or false; got {value!r}")
    if tp in (int, float) and isinstance(value, str):
        try:
            return tp(value)
        except ValueError as exc:
            raise ConfigError(f"{key} must be a number; got {value!r}") from exc
    return value


def _merge_env(data: dict[str, Any], environ: Mapping[str, str]) -> None:
    short = {"MEMMW_PROVIDER": "provider", "MEMMW_FALLBACK": "fallback", "MEMMW_MODEL": "model"}
    for env_key, cfg_key in short.items():
        if environ.get(env_key):
            data[cfg_key] = environ[env_key]
    for env_key, raw in environ.items():
        if not env_key.startswith(ENV_PREFIX):
            continue
        parts = [p.lower() for p in env_key[len(ENV_PREFIX) :].split("__") if p]
        if not parts:
            continue
        node = data
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if not isinstance(child, dict):
                raise ConfigError(f"{env_key} sets a key below the non-table {part!r}")
            node = child
        node[parts[-1]] = _parse_env_value(raw)


def _parse_env_value(raw: str) -> Any:
    try:
        return tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        return raw


def resolve_state_dir(
    state_dir: str | os.PathLike[str] | None, workspace: str | os.PathLike[str] | None = None
) -> Path:
    """``state_dir`` if given, else ``$MEMMW_STATE_DIR``, else a folder of its own per workspace.

    With no ``workspace`` the last fallback is ``~/.memmw`` (kept for callers that have
    none); with one it is :func:`memmw.statedir.default_state_dir` under the platform's
    user state directory, so two workspaces never share an index by accident.
    """
    if state_dir is not None:
        return Path(state_dir).expanduser()
    env = os.environ.get("MEMMW_STATE_DIR")
    if env:
        return Path(env).expanduser()
    if workspace is not None:
        from memmw.statedir import default_state_dir

        return default_state_dir(workspace)
    return Path.home() / ".memmw"


def resolve_workspace(workspace: str | os.PathLike[str] | None) -> Path:
    """``workspace`` if given, else ``$MEMMW_WORKSPACE``, else the current directory."""
    if workspace is not None:
        return Path(workspace).expanduser()
    env = os.environ.get("MEMMW_WORKSPACE")
    return Path(env).expanduser() if env else Path.cwd()
