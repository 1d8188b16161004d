"""Hypothesis strategies generating NO_REPLY forms, ordinary text and chunkings.

Shared by the rule's property tests and the adapter tests; the vocabulary (wrappers,
invisible characters, special tokens) is ``benchmarks/noreply_fuzz.py``'s own.
"""

from __future__ import annotations

import importlib.util
import json
import unicodedata
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType

from hypothesis import strategies as st

TOKEN = "NO_REPLY"

def _fuzz_vocabulary() -> ModuleType:
    """``benchmarks/noreply_fuzz.py``: the one list of wrappers, invisible characters and
    special tokens, shared by the benchmark and these strategies."""
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "noreply_fuzz.py"
    spec = importlib.util.spec_from_file_location("noreply_fuzz_vocabulary", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_VOCABULARY = _fuzz_vocabulary()
#: Invisible format characters (Unicode category Cf): zero-width space, non-joiner,
#: joiner, word joiner, BOM, soft hyphen, Mongolian vowel separator, LRM/RLM.
INVISIBLE: list[str] = _VOCABULARY.INVISIBLE
assert all(unicodedata.category(c) == "Cf" for c in INVISIBLE)
#: End-of-text and turn tokens of common model families.
SPECIAL_TOKENS: list[str] = _VOCABULARY.SPECIAL_END
LEADING_SPECIAL: list[str] = _VOCABULARY.SPECIAL_START
PAIRS: list[tuple[str, str]] = _VOCABULARY.PAIRS
PREFIXES = ["> ", "# ", "## ", "- ", "* ", "\n", "  "]
SUFFIXES = [".", "!", "...", "\n", " ", "。"]
JSON_KEYS = ["action", "reply", "response", "status", "result", "output", "decision"]

_INFO = st.text(
    alphabet=st.characters(codec="utf-8", exclude_characters="\n`~\r"), max_size=12
)
_EXTRA_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 99) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3),
    max_leaves=4,
)
_FULLWIDTH = {chr(c): chr(c + 0xFEE0) for c in range(0x21, 0x7F)}


@st.composite
def token_variants(draw: st.DrawFn) -> str:
    """The token in random case, partly fullwidth or mathematical, maybe escaped."""
    chars = []
    for ch in TOKEN:
        ch = ch.lower() if draw(st.booleans()) else ch
        style = draw(st.sampled_from(["plain", "plain", "plain", "fullwidth", "math"]))
        if style == "fullwidth":
            ch = _FULLWIDTH.get(ch, ch)
        elif style == "math" and ch.isalpha():
            # MATHEMATICAL BOLD letters (NFKC folds them to ASCII)
            base = 0x1D400 if ch.isupper() else 0x1D41A
            ch = chr(base + ord(ch.upper() if ch.isupper() else ch) - (65 if ch.isupper() else 97))
        chars.append(ch)
    out = "".join(chars)
    if draw(st.integers(0, 5)) == 0:
        out = out.replace("_", "\\_")
    return out


@st.composite
def _wrap(draw: st.DrawFn, inner: str) -> str:
    kind = draw(
        st.sampled_from(["pair", "pair", "pair", "fence", "html", "json", "prefix", "suffix", "space"])
    )
    if kind == "pair":
        left, right = draw(st.sampled_from(PAIRS))
        return left + inner + right
    if kind == "fence":
        fence = draw(st.sampled_from(["```", "````", "~~~"]))
        info = draw(_INFO)
        return f"{fence}{info}\n{inner}\n{fence}"
    if kind == "html":
        tag = draw(st.sampled_from(["b", "i", "p", "span", "code", "em", "strong"]))
        return f"<{tag}>{inner}</{tag}>"
    if kind == "json":
        extra = draw(st.dictionaries(st.text(max_size=8), _EXTRA_VALUES, max_size=3))
        key = draw(st.sampled_from(JSON_KEYS))
        items = [(k, v) for k, v in extra.items() if k != key]
        items.insert(draw(st.integers(0, len(items))), (key, inner))
        text = json.dumps(dict(items), ensure_ascii=draw(st.booleans()))
        if draw(st.booleans()):
            text = text.replace(", ", ",").replace(": ", ":")
        return text
    if kind == "prefix":
        return draw(st.sampled_from(PREFIXES)) + inner
    if kind == "suffix":
        return inner + draw(st.sampled_from(SUFFIXES))
    return draw(st.sampled_from([" ", "\n", "\t", " \n "])) + inner


@st.composite
def silent_forms(draw: st.DrawFn) -> str:
    """The token in generated wrappers, nested up to four deep, with invisible characters
    inserted anywhere, special tokens before/after and whitespace around."""
    text = draw(token_variants())
    if draw(st.integers(0, 3)) == 0:
        sep = draw(st.sampled_from([": ", ":", " - ", " — ", "—"]))
        text = text + sep + draw(st.text(max_size=20))
    for _ in range(draw(st.integers(0, 4))):
        text = draw(_wrap(text))
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.sampled_from(INVISIBLE)) + text[at:]
    if draw(st.booleans()):
        text = draw(st.sampled_from(LEADING_SPECIAL)) + text
    if draw(st.booleans()):
        text = text + draw(st.sampled_from(SPECIAL_TOKENS))
    pad = st.sampled_from(["", " ", "\n", "\n\n", "\t"])
    return draw(pad) + text + draw(pad)


def _no_token(text: str) -> bool:
    folded = unicodedata.normalize(
        "NFKC", "".join(c for c in text if unicodedata.category(c) != "Cf")
    ).casefold()
    return "no_reply" not in folded.replace("\\", "") and "<" not in folded and "[/inst]" not in folded


#: Letters, digits, punctuation, emoji, CJK, accents, fullwidth and invisible characters.
_ORDINARY_ALPHABET = st.characters(
    codec="utf-8", exclude_categories=["Cs", "Co", "Cn"], exclude_characters="<"
)


@st.composite
def ordinary_sentences(draw: st.DrawFn) -> str:
    """Text that is not the token after normalisation (it may still say "no reply")."""
    words = draw(
        st.lists(
            st.one_of(
                st.text(_ORDINARY_ALPHABET, min_size=1, max_size=10),
                st.sampled_from(["no", "NO", "reply", "No reply", "N", "NO_", "REPLY", "no-reply", "Plan"]),
            ),
            min_size=1,
            max_size=8,
        )
    )
    seps = st.sampled_from([" ", " ", ", ", ". ", "\n", " — ", " ** "])
    text = words[0]
    for word in words[1:]:
        text += draw(seps) + word
    if not any(c.isalnum() for c in text):
        text += " ok"
    if not _no_token(text):
        text = text.replace("_", "-").replace("<", "(")
    if not _no_token(text):
        text = "ok"
    return text


@st.composite
def text_mentioning_token(draw: st.DrawFn) -> str:
    """A sentence with the token in its middle: word characters on both sides."""
    before = draw(ordinary_sentences())
    after = draw(ordinary_sentences())
    word = draw(st.sampled_from(["the", "a", "reply", "x"]))
    token = draw(st.sampled_from([TOKEN, "no_reply", "`NO_REPLY`", "“NO_REPLY”"]))
    return f"{before} {token} {word} {after}"


_FRAGMENTS = st.sampled_from(
    [
        TOKEN,
        "no_reply",
        "NO",
        "_RE",
        "PLY",
        "N",
        "**",
        "`",
        "```",
        "```json\n",
        "\n```",
        "{",
        "}",
        '"action": ',
        '"NO_REPLY"',
        ":",
        " - ",
        "“",
        "”",
        "«",
        "»",
        "(",
        ")",
        ".",
        "!",
        " ",
        "\n",
        "<",
        ">",
        "<b>",
        "</b>",
        "|",
        "\\",
        "\\_",
        "Saved.",
        "Done",
        "hello",
        "The",
        "token",
        "ＮＯ＿",
        *INVISIBLE[:4],
        *SPECIAL_TOKENS[:5],
        *LEADING_SPECIAL[:2],
    ]
)


@st.composite
def mixed_replies(draw: st.DrawFn) -> str:
    """Anything: fragments of tokens, wrappers, special tokens, words and random text."""
    parts = draw(
        st.lists(st.one_of(_FRAGMENTS, _FRAGMENTS, st.text(max_size=6), silent_forms()), max_size=10)
    )
    return "".join(parts)


def chunked(text: str, cuts: Sequence[int]) -> Iterator[str]:
    """``text`` cut into pieces whose sizes cycle through ``cuts``."""
    pos = i = 0
    while pos < len(text):
        step = max(1, cuts[i % len(cuts)])
        yield text[pos : pos + step]
        pos += step
        i += 1
