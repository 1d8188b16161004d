"""The llama.cpp provider: a tiny random-weight BERT GGUF built here, path resolution, hints."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from memmw.config import LocalConfig, MemoryConfig
from memmw.embeddings.local import (
    LocalEmbeddingProvider,
    parse_hf_ref,
    prompt_prefixes,
    resolve_model_path,
)
from memmw.embeddings.registry import create_provider
from memmw.errors import ConfigError, ProviderError, ProviderUnavailableError
from memmw.testing import require_optional

WORDS = "hello world cat dog memory the is my name favourite colour green blue paris coffee"


def build_tiny_bert_gguf(path: Path, *, n_embd: int = 32, n_layer: int = 2, seed: int = 0) -> None:
    """Write a random-weight BERT embedding model in GGUF form (about 100 kB)."""
    gguf = require_optional("gguf", "test")
    t, names = gguf.MODEL_TENSOR, gguf.TENSOR_NAMES
    n_head, n_ff, n_ctx = 4, 2 * n_embd, 512
    rng = np.random.default_rng(seed)
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    letters = list("abcdefghijklmnopqrstuvwxyz")
    # llama.cpp's WPM vocabulary marks word starts with U+2581 and drops the "##" prefix.
    words = [w for w in WORDS.split() if w not in letters]
    tokens = specials + ["\u2581" + w for w in words + letters] + letters
    types = [gguf.TokenType.CONTROL, gguf.TokenType.UNKNOWN] + [gguf.TokenType.CONTROL] * 3
    types += [gguf.TokenType.NORMAL] * (len(tokens) - len(specials))

    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_context_length(n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_feed_forward_length(n_ff)
    writer.add_block_count(n_layer)
    writer.add_head_count(n_head)
    writer.add_layer_norm_eps(1e-12)
    writer.add_causal_attention(False)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("bert")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_type_count(2)
    writer.add_bos_token_id(2)
    writer.add_eos_token_id(3)
    writer.add_sep_token_id(3)
    writer.add_unk_token_id(1)
    writer.add_pad_token_id(0)
    writer.add_mask_token_id(4)
    writer.add_add_bos_token(True)
    writer.add_add_eos_token(True)

    def rand(*shape: int) -> Any:
        return (rng.standard_normal(shape) * 0.2).astype(np.float32)

    def add_norm(name: str) -> None:
        writer.add_tensor(name + ".weight", np.ones(n_embd, np.float32))
        writer.add_tensor(name + ".bias", np.zeros(n_embd, np.float32))

    writer.add_tensor(names[t.TOKEN_EMBD] + ".weight", rand(len(tokens), n_embd))
    writer.add_tensor(names[t.TOKEN_TYPES] + ".weight", rand(2, n_embd))
    writer.add_tensor(names[t.POS_EMBD] + ".weight", rand(n_ctx, n_embd))
    add_norm(names[t.TOKEN_EMBD_NORM])
    linear = {
        t.ATTN_Q: (n_embd, n_embd),
        t.ATTN_K: (n_embd, n_embd),
        t.ATTN_V: (n_embd, n_embd),
        t.ATTN_OUT: (n_embd, n_embd),
        t.FFN_UP: (n_ff, n_embd),
        t.FFN_DOWN: (n_embd, n_ff),
    }
    for block in range(n_layer):
        for tensor, (rows, cols) in linear.items():
            name = names[tensor].format(bid=block)
            writer.add_tensor(name + ".weight", rand(rows, cols))
            writer.add_tensor(name + ".bias", rand(rows))
        add_norm(names[t.ATTN_OUT_NORM].format(bid=block))
        add_norm(names[t.LAYER_OUT_NORM].format(bid=block))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gguf") / "tiny-bert.gguf"
    build_tiny_bert_gguf(path)
    return path


@pytest.mark.optional
def test_tiny_gguf_model_embeds(tiny_model: Path) -> None:
    require_optional("llama_cpp", "local")
    p = LocalEmbeddingProvider(str(tiny_model), n_ctx=512)
    assert (p.id, p.model, p.dims, p.max_input_bytes) == ("local", "tiny-bert.gguf", 32, 2048)
    vectors = p.embed_documents(["hello world", "my cat", "hello world"])
    assert len(vectors) == 3 and all(len(v) == 32 for v in vectors)
    for v in vectors:
        assert math.isclose(math.hypot(*v), 1.0, rel_tol=1e-5)
    assert np.allclose(vectors[0], vectors[2])
    assert not np.allclose(vectors[0], vectors[1])
    assert np.allclose(p.embed_query("hello world"), vectors[0])
    (long_vec,) = p.embed_documents(["cat dog " * 400])  # 3200 bytes: split and averaged
    assert math.isclose(math.hypot(*long_vec), 1.0, rel_tol=1e-5)
    assert p.embed_documents([]) == []
    assert p.cache_key_data()["model"] == "tiny-bert.gguf"


@pytest.mark.optional
def test_auto_selects_existing_local_model(tiny_model: Path) -> None:
    require_optional("llama_cpp", "local")
    config = MemoryConfig(local=LocalConfig(model_path=str(tiny_model), n_ctx=512))
    selection = create_provider(config)
    assert selection.provider is not None and selection.provider.id == "local"
    assert selection.provider.dims == 32


class _FakeLlama:
    model_path = "/models/fake.gguf"

    def __init__(self, outputs: list[Any]) -> None:
        self.outputs = outputs

    def n_embd(self) -> int:
        return 4

    def embed(self, texts: list[str], truncate: bool = True) -> list[Any]:
        return [self.outputs[i % len(self.outputs)] for i in range(len(texts))]


def test_vectors_are_sanitised_and_normalised() -> None:
    p = LocalEmbeddingProvider(llama=_FakeLlama([[float("nan"), 3.0, float("inf"), 4.0]]))
    assert p.embed_query("x") == [0.0, 0.6, 0.0, 0.8]


def test_token_level_outputs_are_mean_pooled() -> None:
    p = LocalEmbeddingProvider(llama=_FakeLlama([[[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0]]]))
    v = p.embed_query("x")
    assert v[0] == pytest.approx(v[1]) and math.isclose(math.hypot(*v), 1.0)


def test_llama_errors_become_provider_errors() -> None:
    class Broken(_FakeLlama):
        def embed(self, texts: list[str], truncate: bool = True) -> list[Any]:
            raise RuntimeError("llama_decode returned -1")

    with pytest.raises(ProviderError, match="llama_decode"):
        LocalEmbeddingProvider(llama=Broken([])).embed_query("x")


def test_missing_llama_cpp_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # makes the import fail
    with pytest.raises(ProviderUnavailableError, match=r"pip install 'memmw\[local\]'"):
        LocalEmbeddingProvider(str(model))


def test_hf_reference_parsing() -> None:
    assert parse_hf_ref("hf:owner/repo/file.gguf") == ("owner/repo", "file.gguf")
    assert parse_hf_ref("hf:owner/repo/sub/dir/f.gguf") == ("owner/repo", "sub/dir/f.gguf")
    with pytest.raises(ConfigError, match=r"hf:owner/repo/file\.gguf"):
        parse_hf_ref("hf:owner/file.gguf")


def test_hf_reference_uses_cache_then_download(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[tuple[str, str, bool]] = []
    cached = tmp_path / "cached.gguf"

    def download(repo: str, filename: str, **kw: Any) -> str:
        calls.append((repo, filename, bool(kw.get("local_files_only"))))
        if kw.get("local_files_only"):
            raise FileNotFoundError("not cached")
        return str(cached)

    monkeypatch.setitem(sys.modules, "huggingface_hub", SimpleNamespace(hf_hub_download=download))
    assert resolve_model_path("hf:o/r/m.gguf", str(tmp_path)) == cached
    assert calls == [("o/r", "m.gguf", True), ("o/r", "m.gguf", False)]


def test_hf_reference_offline_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    def download(repo: str, filename: str, **kw: Any) -> str:
        raise ConnectionError("offline")

    monkeypatch.setitem(sys.modules, "huggingface_hub", SimpleNamespace(hf_hub_download=download))
    with pytest.raises(ProviderUnavailableError, match="offline\\? Download"):
        resolve_model_path("hf:o/r/m.gguf")
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ProviderUnavailableError, match="huggingface_hub"):
        resolve_model_path("hf:o/r/m.gguf")


def test_plain_paths_and_urls(tmp_path: Path) -> None:
    with pytest.raises(ProviderUnavailableError, match="not found"):
        resolve_model_path(str(tmp_path / "missing.gguf"))
    with pytest.raises(ProviderUnavailableError, match="is a URL"):
        resolve_model_path("https://example.test/m.gguf")
    existing = tmp_path / "ok.gguf"
    existing.write_bytes(b"x")
    assert resolve_model_path(str(existing)) == existing


def test_prompt_prefixes_by_model_family() -> None:
    assert prompt_prefixes("multilingual-e5-small-Q8_0.gguf") == ("query: ", "passage: ")
    gemma = prompt_prefixes(
        "hf:ggml-org/embeddinggemma-300m-qat-q8_0-GGUF/embeddinggemma-300m-qat-Q8_0.gguf"
    )
    assert gemma[0].startswith("task: search result")
    assert prompt_prefixes("nomic-embed-text-v1.5.Q8_0.gguf")[1] == "search_document: "
    assert prompt_prefixes("tiny-bert.gguf") == ("", "")


def test_prefixes_reach_the_model() -> None:
    seen: list[str] = []

    class Recording(_FakeLlama):
        def embed(self, texts: list[str], truncate: bool = True) -> list[Any]:
            seen.extend(texts)
            return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    p = LocalEmbeddingProvider("my-e5-base.gguf", llama=Recording([]))
    p.embed_query("cat")
    p.embed_documents(["dog"])
    assert seen == ["query: cat", "passage: dog"]
