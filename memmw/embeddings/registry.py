"""The provider registry, the ``auto`` selection order and start-up fallback."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memmw.config import MemoryConfig
from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.exceptions import MissingApiKeyError
from memmw.embeddings.fallback import FallbackProvider
from memmw.errors import ConfigError, ProviderUnavailableError

logger = logging.getLogger(__name__)

ProviderFactory = Callable[[MemoryConfig], EmbeddingProvider]
"""Builds a provider from the memory config; raises ProviderUnavailableError if it cannot."""

_RESERVED = ("auto", "none")
_registry: dict[str, ProviderFactory] = {}
_lock = threading.Lock()


@dataclass(frozen=True, kw_only=True)
class ProviderSelection:
    """The outcome of :func:`create_provider`.

    Attributes:
        provider: The provider to use, or None for keyword-only search.
        requested: The configured provider name (``auto``, ``openai``, ...).
        fallback_from: Name of the provider that could not start, when the fallback is used.
        fallback_reason: Why that provider could not start.
        unavailable_reason: Why there is no provider at all (``auto`` found none), or None.
    """

    provider: EmbeddingProvider | None
    requested: str
    fallback_from: str | None = None
    fallback_reason: str | None = None
    unavailable_reason: str | None = None

    @property
    def keyword_only(self) -> bool:
        """True when search runs without vectors."""
        return self.provider is None

    def to_dict(self) -> dict[str, Any]:
        """Plain data for status payloads (never includes keys)."""
        provider = self.provider
        return {
            "provider": provider.id if provider is not None else None,
            "model": provider.model if provider is not None else None,
            "requested": self.requested,
            "fallback_from": self.fallback_from,
            "fallback_reason": self.fallback_reason,
            "unavailable_reason": self.unavailable_reason,
        }


def _normalise_name(name: str) -> str:
    if not isinstance(name, str) or not name.strip():
        raise ConfigError("provider names must be non-empty strings")
    return name.strip().lower()


def register_provider(name: str, factory: ProviderFactory, *, replace: bool = False) -> None:
    """Register a provider factory under ``name``.

    Args:
        name: Registry name (case-insensitive); ``auto`` and ``none`` are reserved.
        factory: Called with the :class:`MemoryConfig`; returns a provider or raises
            :class:`ProviderUnavailableError` (:class:`MissingApiKeyError` for a missing key).
        replace: Allow replacing an existing registration.

    Raises:
        ConfigError: The name is reserved, or taken and ``replace`` is False.
    """
    key = _normalise_name(name)
    if key in _RESERVED:
        raise ConfigError(f"provider name {key!r} is reserved")
    with _lock:
        if key in _registry and not replace:
            raise ConfigError(f"provider {key!r} is already registered (pass replace=True)")
        _registry[key] = factory


def unregister_provider(name: str) -> None:
    """Remove a registration (no error if absent)."""
    with _lock:
        _registry.pop(_normalise_name(name), None)


def available_providers() -> list[str]:
    """Registered provider names, sorted (``auto`` and ``none`` are always accepted too)."""
    with _lock:
        return sorted(_registry)


def get_provider_factory(name: str) -> ProviderFactory:
    """Return the factory registered under ``name``.

    Raises:
        ConfigError: Unknown name; the message lists the known ones.
    """
    key = _normalise_name(name)
    with _lock:
        factory = _registry.get(key)
    if factory is None:
        known = ", ".join([*_RESERVED, *available_providers()])
        raise ConfigError(f"unknown embedding provider {name!r}; known providers: {known}")
    return factory


def _is_remote_ref(path: str) -> bool:
    lowered = path.strip().lower()
    return lowered.startswith(("hf:", "http://", "https://"))


def _local_model_file(config: MemoryConfig) -> bool:
    path = config.local.model_path
    return bool(path) and not _is_remote_ref(str(path)) and Path(str(path)).expanduser().is_file()


def _offline_installed() -> bool:
    from memmw.embeddings.offline import offline_available

    return offline_available()


def _has_key(name: str, config: MemoryConfig) -> bool:
    env = ("OPENAI_API_KEY",) if name == "openai" else ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    return bool(config.remote.api_key) or any(os.environ.get(v) for v in env)


def _auto(config: MemoryConfig) -> tuple[EmbeddingProvider | None, str | None]:
    """The ``auto`` order; returns (provider, unavailable_reason)."""
    if _local_model_file(config):
        return get_provider_factory("local")(config), None
    skipped: list[str] = []
    for name in ("openai", "gemini"):
        if not _has_key(name, config):
            # No key, so this provider cannot be meant: skip it without importing its SDK
            # (the OpenAI and Gemini SDKs take seconds to import).
            logger.debug("auto: skipping %s (no API key set)", name)
            skipped.append(name)
            continue
        try:
            return get_provider_factory(name)(config), None
        except MissingApiKeyError as exc:
            logger.debug("auto: skipping %s (%s)", name, exc)
            skipped.append(name)
        except ProviderUnavailableError as exc:
            # The SDK is not installed. With a key set the user meant this provider, so
            # that stays an error; without one it is simply not this machine's provider.
            if _has_key(name, config):
                raise
            logger.debug("auto: skipping %s (%s)", name, exc)
            skipped.append(name)
    if _offline_installed():
        return get_provider_factory("offline")(config), None
    reason = (
        "no embedding provider available: no local GGUF model file (local.model_path), "
        "no OPENAI_API_KEY, no GEMINI_API_KEY or GOOGLE_API_KEY, and the offline model is "
        "not installed (pip install 'memmw[offline]'); search is keyword-only"
    )
    return None, reason


def _build(name: str, config: MemoryConfig) -> tuple[EmbeddingProvider | None, str | None]:
    if name == "none":
        return None, "provider is 'none' (keyword-only by configuration)"
    if name == "auto":
        return _auto(config)
    return get_provider_factory(name)(config), None


def create_provider(config: MemoryConfig) -> ProviderSelection:
    """Build the embedding provider the config asks for.

    ``provider="auto"`` tries, in order: ``local`` when ``local.model_path`` is an existing
    file; ``openai`` when a key is set (``remote.api_key`` or ``OPENAI_API_KEY``); ``gemini``
    when ``GEMINI_API_KEY``/``GOOGLE_API_KEY`` is set; the ``offline`` model when its package
    is installed; otherwise keyword-only (``provider`` None, ``unavailable_reason`` set). A
    missing key skips to the next candidate; any other error is raised.

    An explicit provider that cannot start raises :class:`ProviderUnavailableError` unless
    ``fallback`` names another provider, which is then used and recorded. When a fallback
    is configured the provider is wrapped in a :class:`FallbackProvider`, so a run-time
    failure also switches to the fallback.

    Args:
        config: The memory configuration.

    Raises:
        ConfigError: Unknown provider name.
        ProviderUnavailableError: The provider (and its fallback) cannot start.
    """
    requested = _normalise_name(config.provider)
    fallback = _normalise_name(config.fallback)
    use_fallback = fallback != "none" and fallback != requested
    if requested == "none":
        return ProviderSelection(
            provider=None, requested=requested, unavailable_reason="provider is 'none'"
        )
    if requested != "auto":
        get_provider_factory(requested)  # unknown names fail before anything starts
    if use_fallback and fallback != "auto":
        get_provider_factory(fallback)
    try:
        provider, reason = _build(requested, config)
    except ProviderUnavailableError as exc:
        if not use_fallback or requested == "auto":
            raise
        logger.warning("embedding provider %s cannot start; using fallback %s", requested, fallback)
        try:
            replacement, reason = _build(fallback, config)
        except ProviderUnavailableError as exc2:
            raise ProviderUnavailableError(
                f"{exc} The fallback provider {fallback!r} cannot start either: {exc2}"
            ) from exc2
        return ProviderSelection(
            provider=replacement,
            requested=requested,
            fallback_from=requested,
            fallback_reason=str(exc),
            unavailable_reason=reason,
        )
    if provider is None:
        return ProviderSelection(provider=None, requested=requested, unavailable_reason=reason)
    if use_fallback and provider.id != fallback:

        def build_fallback() -> EmbeddingProvider | None:
            return _build(fallback, config)[0]

        provider = FallbackProvider(provider, build_fallback, fallback_name=fallback)
    return ProviderSelection(provider=provider, requested=requested)


# Built-in providers. Each factory imports its module (and SDK) only when called.


def _openai_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.openai import OpenAIEmbeddingProvider

    return OpenAIEmbeddingProvider.from_config(config)


def _gemini_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.gemini import GeminiEmbeddingProvider

    return GeminiEmbeddingProvider.from_config(config)


def _local_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.local import LocalEmbeddingProvider

    return LocalEmbeddingProvider.from_config(config)


def _offline_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.offline import OfflineEmbeddingProvider

    return OfflineEmbeddingProvider.from_config(config)


def _minilm_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.minilm import MiniLMEmbeddingProvider

    return MiniLMEmbeddingProvider()


def _fake_factory(config: MemoryConfig) -> EmbeddingProvider:
    from memmw.embeddings.fake import FakeEmbeddingProvider

    dims = config.remote.dimensions or 64
    return FakeEmbeddingProvider(dims=dims, model=config.model or "fake-hash-v1")


for _name, _factory in (
    ("openai", _openai_factory),
    ("gemini", _gemini_factory),
    ("local", _local_factory),
    ("offline", _offline_factory),
    ("minilm", _minilm_factory),
    ("fake", _fake_factory),
):
    register_provider(_name, _factory)
