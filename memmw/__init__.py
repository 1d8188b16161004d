"""memmw: long-term memory middleware for AI agents.

Markdown files are the source of truth; a per-agent SQLite index is derived from them and
can always be rebuilt; search is keyword (BM25) plus vectors, with ``path#line`` citations.
"""

from memmw.config import (
    ChunkingConfig,
    ExtraPath,
    HybridConfig,
    MemoryConfig,
    MMRConfig,
    QueryConfig,
    StoreConfig,
    SyncConfig,
    TemporalDecayConfig,
)
from memmw.engine.memory import Memory
from memmw.errors import (
    ConfigError,
    IndexBusyError,
    IndexStoreError,
    MemmwError,
    PathPolicyError,
    ProviderError,
    ProviderUnavailableError,
)
from memmw.types import FileIssue, ReadResult, SearchHit, Status, SyncReport

__version__ = "0.1.0.dev0"

__all__ = [
    "ChunkingConfig",
    "ConfigError",
    "ExtraPath",
    "FileIssue",
    "HybridConfig",
    "IndexBusyError",
    "IndexStoreError",
    "MMRConfig",
    "MemmwError",
    "Memory",
    "MemoryConfig",
    "PathPolicyError",
    "ProviderError",
    "ProviderUnavailableError",
    "QueryConfig",
    "ReadResult",
    "SearchHit",
    "Status",
    "StoreConfig",
    "SyncConfig",
    "SyncReport",
    "TemporalDecayConfig",
    "__version__",
]
