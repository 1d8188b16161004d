"""memmw: long-term memory middleware for AI agents.

Markdown files are the source of truth; a per-agent SQLite index is derived from them and
can always be rebuilt; search is keyword (BM25) plus vectors, with ``path#line`` citations.

The public API is this package, :mod:`memmw.middleware`, :mod:`memmw.adapters.langchain`,
:mod:`memmw.adapters.custom_loop`, :mod:`memmw.adapters.mcp`, :mod:`memmw.consolidation`
and :mod:`memmw.testing` (each lists its names in ``__all__``). Every other module is internal and may change
without notice; ``docs/architecture.md`` says what lives where.
"""

from memmw.config import (
    ActiveMemoryConfig,
    BatchConfig,
    BootstrapConfig,
    CacheConfig,
    ChunkingConfig,
    ConsolidationConfig,
    ExtraPath,
    FlushConfig,
    HybridConfig,
    LocalConfig,
    MemoryConfig,
    MMRConfig,
    QueryConfig,
    ReadConfig,
    RemoteConfig,
    SessionArchiveConfig,
    SessionSyncConfig,
    StoreConfig,
    SyncConfig,
    TemporalDecayConfig,
    TracingConfig,
)
from memmw.engine.memory import Memory
from memmw.errors import (
    ArchiveError,
    BatchUnavailableError,
    CircuitOpenError,
    ConfigError,
    ContentPolicyError,
    FileBusyError,
    FileReadError,
    ForgetError,
    IndexBusyError,
    IndexCorruptError,
    IndexStoreError,
    InvalidVectorError,
    MemmwError,
    MissingApiKeyError,
    NoteEditError,
    PathPolicyError,
    ProviderError,
    ProviderUnavailableError,
    QueryTimeoutError,
    ToolArgumentError,
    WiringError,
)
from memmw.middleware import MemoryMiddleware, Session
from memmw.redaction import RedactingFilter
from memmw.types import FileIssue, ReadResult, SearchHit, SearchResult, Status, SyncReport

__version__ = "0.1.0.dev0"

__all__ = [
    "ActiveMemoryConfig",
    "ArchiveError",
    "BatchConfig",
    "BatchUnavailableError",
    "BootstrapConfig",
    "CacheConfig",
    "ChunkingConfig",
    "CircuitOpenError",
    "ConfigError",
    "ConsolidationConfig",
    "ContentPolicyError",
    "ExtraPath",
    "FileBusyError",
    "FileIssue",
    "FileReadError",
    "FlushConfig",
    "ForgetError",
    "HybridConfig",
    "IndexBusyError",
    "IndexCorruptError",
    "IndexStoreError",
    "InvalidVectorError",
    "LocalConfig",
    "MMRConfig",
    "MemmwError",
    "Memory",
    "MemoryConfig",
    "MemoryMiddleware",
    "MissingApiKeyError",
    "NoteEditError",
    "PathPolicyError",
    "ProviderError",
    "ProviderUnavailableError",
    "QueryConfig",
    "QueryTimeoutError",
    "ReadConfig",
    "ReadResult",
    "RedactingFilter",
    "RemoteConfig",
    "SearchHit",
    "SearchResult",
    "Session",
    "SessionArchiveConfig",
    "SessionSyncConfig",
    "Status",
    "StoreConfig",
    "SyncConfig",
    "SyncReport",
    "TemporalDecayConfig",
    "ToolArgumentError",
    "TracingConfig",
    "WiringError",
    "__version__",
]
