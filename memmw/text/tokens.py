"""Token counting: tiktoken when its encoding loads, else ~4 chars/token with CJK weighted."""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

log = logging.getLogger(__name__)

#: Characters a non-CJK token covers on average (the reference's estimate).
CHARS_PER_TOKEN = 4
#: Tokens added per chat message for role and framing.
MESSAGE_OVERHEAD_TOKENS = 4
DEFAULT_ENCODING = "cl100k_base"

_CJK = re.compile(
    "[\u1100-\u11ff\u2e80-\u2fdf\u3000-\u303f\u3040-\u30ff\u3100-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003134f]"
)


class Encoding(Protocol):
    """The part of a tiktoken ``Encoding`` memmw uses."""

    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]:
        """Return the token ids of ``text``."""
        ...


EncodingLoader = Callable[[str], Encoding]


def estimate_tokens(text: str) -> int:
    """Estimate tokens without a tokenizer: 4 chars per token, each CJK character one token.

    Args:
        text: Any text.

    Returns:
        A non-negative token estimate (0 only for the empty string).
    """
    if not text:
        return 0
    cjk = len(_CJK.findall(text))
    other = len(text) - cjk
    return cjk + math.ceil(other / CHARS_PER_TOKEN)


def _load_tiktoken(name: str) -> Encoding:
    import tiktoken

    return tiktoken.get_encoding(name)  # type: ignore[no-any-return]


_warned = False
_warn_lock = threading.Lock()


def _warn_once(name: str, exc: BaseException) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    log.warning(
        "tiktoken encoding %r is unavailable (%s: %s); estimating tokens at ~%d chars/token. "
        "Install memmw[tokens] and pre-seed TIKTOKEN_CACHE_DIR for exact counts offline.",
        name,
        type(exc).__name__,
        str(exc)[:200],
        CHARS_PER_TOKEN,
    )


class TokenCounter:
    """Counts tokens with tiktoken when it loads, otherwise with :func:`estimate_tokens`.

    The encoding is loaded lazily on first use. tiktoken downloads its BPE file the first
    time (into ``TIKTOKEN_CACHE_DIR``); offline that fails, and the counter falls back to
    the estimate, logging one warning per process.

    Example:
        >>> TokenCounter(loader=None).count("")
        0

    Args:
        encoding: tiktoken encoding name.
        loader: Callable returning an encoding for a name; None uses tiktoken. Tests
            inject failing or fake loaders here.
        use_tiktoken: False always estimates (no import attempted).
    """

    def __init__(
        self,
        encoding: str = DEFAULT_ENCODING,
        *,
        loader: EncodingLoader | None = None,
        use_tiktoken: bool = True,
    ) -> None:
        self.encoding_name = encoding
        self._loader = loader or _load_tiktoken
        self._use_tiktoken = use_tiktoken
        self._encoding: Encoding | None = None
        self._loaded = False
        self._lock = threading.Lock()

    def _get_encoding(self) -> Encoding | None:
        if self._loaded:
            return self._encoding
        with self._lock:
            if not self._loaded:
                if self._use_tiktoken:
                    try:
                        self._encoding = self._loader(self.encoding_name)
                    except Exception as exc:  # ImportError, network errors, bad cache files
                        _warn_once(self.encoding_name, exc)
                        self._encoding = None
                self._loaded = True
        return self._encoding

    @property
    def backend(self) -> str:
        """``tiktoken`` when the encoding loaded, else ``estimate`` (loads on first access)."""
        return "tiktoken" if self._get_encoding() is not None else "estimate"

    def count(self, text: str) -> int:
        """Number of tokens in ``text``."""
        if not text:
            return 0
        enc = self._get_encoding()
        if enc is None:
            return estimate_tokens(text)
        try:
            return len(enc.encode(text, disallowed_special=()))
        except Exception:  # a broken encoding must not break the agent loop
            log.debug("tiktoken encode failed; estimating", exc_info=True)
            return estimate_tokens(text)

    def count_messages(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Tokens a list of chat messages (dicts with ``role``/``content``) will cost.

        Text blocks, tool calls and their arguments are counted; each message adds a
        small framing overhead.
        """
        total = 0
        for message in messages:
            total += MESSAGE_OVERHEAD_TOKENS + self.count(message_text_for_count(message))
        return total


def content_text(content: Any) -> str:
    """Plain text of message content: a string, or the text blocks of a block list."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, Mapping):
        text = content.get("text")
        return text if isinstance(text, str) else ""
    if isinstance(content, (list, tuple)):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping) and isinstance(block.get("text"), str):
                parts.append(block["text"])
        return "\n".join(parts)
    return str(content)


def message_text_for_count(message: Mapping[str, Any]) -> str:
    """Everything in a message that costs tokens: content plus tool-call names and args."""
    text = content_text(message.get("content"))
    calls = message.get("tool_calls")
    if calls:
        try:
            text += "\n" + json.dumps(calls, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text += "\n" + str(calls)
    return text


_default: TokenCounter | None = None


def default_counter() -> TokenCounter:
    """The shared process-wide counter (cl100k_base)."""
    global _default
    if _default is None:
        _default = TokenCounter()
    return _default


def count_tokens(text: str) -> int:
    """Count tokens of ``text`` with the shared counter."""
    return default_counter().count(text)


__all__ = [
    "CHARS_PER_TOKEN",
    "DEFAULT_ENCODING",
    "MESSAGE_OVERHEAD_TOKENS",
    "Encoding",
    "EncodingLoader",
    "TokenCounter",
    "content_text",
    "count_tokens",
    "default_counter",
    "estimate_tokens",
    "message_text_for_count",
]
