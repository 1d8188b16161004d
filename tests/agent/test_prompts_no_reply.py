"""The NO_REPLY rule as invariants: normalisation, silence, unchanged text, stream == final.

The generators build the forms (wrappers, fences with random info strings, JSON envelopes
with random extra keys, invisible and NFKC-variant characters, special tokens, whitespace)
instead of listing them; ``noreply_strategies`` is shared with the adapter tests and the
fuzz benchmark.
"""

from __future__ import annotations

import unicodedata

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memmw.agent.prompts import (
    NO_REPLY,
    NoReplyStreamGuard,
    canonical_reply,
    is_silent_reply,
    strip_no_reply,
    visible_text,
)

from .noreply_strategies import (
    INVISIBLE,
    SPECIAL_TOKENS,
    chunked,
    mixed_replies,
    ordinary_sentences,
    silent_forms,
    text_mentioning_token,
)


def stream(text: str, cuts: list[int]) -> tuple[str, list[str]]:
    guard = NoReplyStreamGuard()
    parts = [guard.feed(piece) for piece in chunked(text, cuts)]
    parts.append(guard.finish())
    return "".join(parts), parts


CUTS = st.lists(st.integers(min_value=1, max_value=9), min_size=1, max_size=12)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# -- the listed cases of issue 19 (each reached the user on c5acdd4) ---------------------

LISTED_SILENT = [
    "NO_\u200bREPLY",  # zero-width space
    "NO_RE\u200dPLY",  # zero-width joiner
    "NO\u00ad_REPLY",  # soft hyphen
    "NO_REP\u2060LY",  # word joiner
    "\ufeffNO_REPLY",  # BOM
    "“NO_REPLY”",
    "«NO_REPLY»",
    "‘NO_REPLY’",
    '```json\n{"action":"NO_REPLY","reason":"nothing new to add"}\n```',
    '{"action": "NO_REPLY", "reason": "not addressed to me"}',
    '{"status": "no_reply", "note": "x"}',
    "ＮＯ＿ＲＥＰＬＹ",
    "NO\\_REPLY",
    " ",
    "\n\n\t",
    "",
    "<|endoftext|>",
    "<|im_end|>",
    "</s>",
    "<|eot_id|>",
    "<end_of_turn>",
    "NO_REPLY<|im_end|>",
    "<|im_start|>assistant\nNO_REPLY<|im_end|>",
]


@pytest.mark.parametrize("text", LISTED_SILENT)
@pytest.mark.parametrize("step", [1, 2, 3, 1000])
def test_listed_forms_are_silent_invoked_and_streamed(text: str, step: int) -> None:
    assert visible_text(text) is None and is_silent_reply(text)
    out, parts = stream(text, [step])
    assert parts == [""] * len(parts), out


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("Hello there.<|eot_id|>", "Hello there."),
        ("Sure thing!<|im_end|>\n", "Sure thing!"),
        ("<s>Hi</s>", "Hi"),
        ("Saved. “NO_REPLY”", "Saved."),
        ("Noted.\n\n«NO_REPLY»", "Noted."),
        ("Family: 👨\u200d👩\u200d👧", "Family: 👨\u200d👩\u200d👧"),
        ("ＡＢＣ", "ＡＢＣ"),
        ("I said “no reply” to him.", "I said “no reply” to him."),
        ("The NO_REPLY token is special.", "The NO_REPLY token is special."),
    ],
)
@pytest.mark.parametrize("step", [1, 2, 5, 1000])
def test_listed_forms_with_text_keep_exactly_the_text(text: str, shown: str, step: int) -> None:
    assert visible_text(text) == shown
    assert stream(text, [step])[0] == shown


def test_canonical_reply_is_the_one_normalisation() -> None:
    assert canonical_reply("**“ＮＯ＿\u200bREPLY”**") == NO_REPLY
    assert canonical_reply('```json\n{"response": "NO_REPLY", "why": 1}\n```') == NO_REPLY
    assert canonical_reply("<|eot_id|>  ") == ""
    assert canonical_reply("  Hello<|im_end|>") == "Hello"
    assert strip_no_reply("Done. NO_REPLY<|im_end|>") == "Done."


# -- invariants ----------------------------------------------------------------------


@SETTINGS
@given(form=silent_forms(), cuts=CUTS)
def test_every_generated_wrapping_is_silent_in_every_chunking(form: str, cuts: list[int]) -> None:
    assert visible_text(form) is None, form
    _out, parts = stream(form, cuts)
    assert parts == [""] * len(parts), (form, parts)


@SETTINGS
@given(text=ordinary_sentences(), cuts=CUTS)
def test_ordinary_text_is_delivered_unchanged_in_every_chunking(
    text: str, cuts: list[int]
) -> None:
    assert visible_text(text) == text
    assert stream(text, cuts)[0] == text


@SETTINGS
@given(text=text_mentioning_token(), cuts=CUTS)
def test_a_token_inside_a_sentence_changes_nothing(text: str, cuts: list[int]) -> None:
    assert visible_text(text) == text
    assert stream(text, cuts)[0] == text


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mixed_replies(), cuts=CUTS)
def test_stream_equals_the_final_rule_for_every_chunking(text: str, cuts: list[int]) -> None:
    """Whatever the reply and the chunking, the streamed text is exactly the final text,
    and a silent reply shows no piece at all."""
    expected = visible_text(text)
    out, parts = stream(text, cuts)
    assert out == (expected or ""), (text, parts)
    if expected is None:
        assert parts == [""] * len(parts)


@SETTINGS
@given(
    body=ordinary_sentences(),
    special=st.sampled_from(SPECIAL_TOKENS),
    where=st.sampled_from(["before", "after", "both"]),
)
def test_special_tokens_at_either_end_are_never_shown(body: str, special: str, where: str) -> None:
    text = {
        "before": f"{special}{body}",
        "after": f"{body}{special}",
        "both": f"{special}\n{body}{special}\n",
    }[where]
    shown = visible_text(text)
    assert shown is not None and special not in shown
    # The cut takes the whitespace and invisible characters beside the token with it (a
    # soft hyphen right after "<|endoftext|>" goes too); the body's visible text stays.
    assert _without_blank_ends(shown) == _without_blank_ends(body)


def _without_blank_ends(text: str) -> str:
    """``text`` without whitespace and invisible (format) characters at either end."""
    blank = {c for c in text if c.isspace() or unicodedata.category(c) == "Cf"}
    return text.strip("".join(blank))


@SETTINGS
@given(
    filler=st.text(alphabet=" \t\n" + "".join(INVISIBLE), max_size=12),
    specials=st.lists(st.sampled_from(SPECIAL_TOKENS), max_size=3),
)
def test_blank_replies_are_silent(filler: str, specials: list[str]) -> None:
    text = filler + "".join(specials) + filler
    assert visible_text(text) is None and is_silent_reply(text)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=mixed_replies())
def test_the_rule_is_idempotent(text: str) -> None:
    """What is shown passes the rule unchanged (LangChain guards the streamed message again)."""
    shown = visible_text(text)
    if shown is not None:
        assert visible_text(shown) == shown
