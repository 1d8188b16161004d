"""Extension points: your own embedding provider, fact extractor and working-memory writes.

Public module (its names are pinned by ``tests/test_public_api.py``)::

    from memmw.extensions import register_provider, extractor_hook, write_active_context

* **Embedding providers.** ``register_provider(name, factory)`` adds a provider that
  ``MemoryConfig(provider=name)`` selects; ``factory(config)`` returns an object with the
  :class:`EmbeddingProvider` shape and raises ``ProviderUnavailableError`` when it cannot
  start. ``unregister_provider`` and ``available_providers`` complete the registry.
* **Fact extraction.** ``extractor_hook(memory, extractor)`` is a callback for
  ``middleware.hooks.on(Event.ARCHIVE, ...)``: after each ``/new`` archive, ``extractor``
  (for example an LLM call returning ``[{"entity", "key", "value"}]``) proposes facts,
  which are written to the Markdown first and then indexed.
* **Working memory.** ``write_active_context(workspace, text)`` replaces
  ``active-context.md`` (redacted, atomic, never through a symlink); private sessions load
  it at start.
"""

from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.registry import (
    ProviderFactory,
    available_providers,
    register_provider,
    unregister_provider,
)
from memmw.hooks.extractor import extractor_hook
from memmw.workspace.active_context import write_active_context

__all__ = [
    "EmbeddingProvider",
    "ProviderFactory",
    "available_providers",
    "extractor_hook",
    "register_provider",
    "unregister_provider",
    "write_active_context",
]
