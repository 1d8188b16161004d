"""Embedding providers: protocol, registry, cache and the bundled backends.

Internal package: not part of the public API (see ``memmw`` and docs/architecture.md).
"""

from memmw.embeddings.base import (
    EmbeddingProvider as EmbeddingProvider,
)
from memmw.embeddings.exceptions import (
    BatchUnavailableError as BatchUnavailableError,
)
from memmw.embeddings.exceptions import (
    MissingApiKeyError as MissingApiKeyError,
)
from memmw.embeddings.fallback import (
    FallbackProvider as FallbackProvider,
)
from memmw.embeddings.registry import (
    ProviderFactory as ProviderFactory,
)
from memmw.embeddings.registry import (
    ProviderSelection as ProviderSelection,
)
from memmw.embeddings.registry import (
    available_providers as available_providers,
)
from memmw.embeddings.registry import (
    create_provider as create_provider,
)
from memmw.embeddings.registry import (
    get_provider_factory as get_provider_factory,
)
from memmw.embeddings.registry import (
    register_provider as register_provider,
)
from memmw.embeddings.registry import (
    unregister_provider as unregister_provider,
)
from memmw.embeddings.retry import (
    RetryPolicy as RetryPolicy,
)
from memmw.embeddings.retry import (
    is_retryable as is_retryable,
)
