"""The Memory Recall section, flush prompts and NO_REPLY handling."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.agent.prompts import (
    NO_REPLY,
    RECALL_HEADING,
    NoReplyStreamGuard,
    append_section,
    flush_system_prompt,
    flush_user_prompt,
    is_silent_reply,
    memory_recall_section,
    strip_no_reply,
    visible_text,
)

from ..adapters.conftest import NO_REPLY_FORMS


def test_no_section_without_memory_tools() -> None:
    assert memory_recall_section([]) == ""
    assert memory_recall_section(["web_search", "memory_append"]) == ""


def test_both_tools_variant() -> None:
    text = memory_recall_section(["memory_search", "memory_get"])
    assert text.startswith(RECALL_HEADING + "\n") and text.endswith("\n\n")
    assert "memory_search" in text and "memory_get" in text
    for topic in ("decisions", "dates", "people", "preferences", "todos"):
        assert topic in text
    assert "Source: <path#line>" in text
    assert "checked memory" in text


def test_search_only_and_get_only_variants() -> None:
    search_only = memory_recall_section(["memory_search"])
    assert "answer from the snippets" in search_only and "memory_get" not in search_only
    get_only = memory_recall_section(["memory_get"])
    assert "names a memory file" in get_only and "memory_search" not in get_only


def test_citations_off_variant() -> None:
    text = memory_recall_section(["memory_search", "memory_get"], citations=False)
    assert "Source:" not in text and "Do not mention file paths or line numbers" in text


def test_sources_listed_from_config() -> None:
    text = memory_recall_section(
        ["memory_search"], sources=("memory", "sessions"), extra_paths=("docs",)
    )
    assert "past session transcripts" in text and "extra paths (docs)" in text


def test_append_section_is_idempotent() -> None:
    section = memory_recall_section(["memory_search"])
    once = append_section("Base.", section)
    assert once.startswith("Base.\n\n") and append_section(once, section) == once
    assert append_section(None, section) == section
    assert append_section("Base.", "") == "Base."


def test_flush_prompts_name_the_dated_target() -> None:
    day = dt.date(2026, 3, 10)
    now = dt.datetime(2026, 3, 10, 15, 5, tzinfo=dt.timezone(dt.timedelta(hours=1)))
    system = flush_system_prompt(day)
    user = flush_user_prompt(day, now)
    for text in (system, user):
        assert "memory/2026-03-10.md" in text and "NO_REPLY" in text and "MEMORY.md" in text
    assert "append" in user.lower() and "Current time: 2026-03-10T15:05+01:00" in user
    assert "YYYY" not in user


@pytest.mark.parametrize(
    ("text", "silent"),
    [
        ("NO_REPLY", True),
        ("  no_reply \n", True),
        ('{"action": "NO_REPLY"}', True),
        ("Saved the note. NO_REPLY", False),
        ("NO_REPLY but here is more", False),
        ('{"action": "NO_REPLY", "x": 1}', True),  # extra keys: still an envelope
        ("NO_REPLY.", True),
        ("**NO_REPLY**", True),
        ("`NO_REPLY`", True),
        ("_NO_REPLY_", True),
        ('"NO_REPLY"', True),
        ("> NO_REPLY", True),
        ("NO_REPLY: nothing to add", True),
        ("NO_REPLY - not addressed to me", True),
        ("NO_REPLY\u2014quiet", True),
        ("FOO_NO_REPLY", False),
        ("The NO_REPLY token is special.", False),
        ("", True),  # blank
        (" \n", True),
        (None, False),
    ],
)
def test_is_silent_reply(text: str | None, silent: bool) -> None:
    assert is_silent_reply(text) is silent


def test_strip_no_reply() -> None:
    assert strip_no_reply("Done. NO_REPLY") == "Done."
    assert strip_no_reply("NO_REPLY: done") == "done"


#: NO_REPLY forms and what a person may see (None = nothing): one table for the rules and
#: both adapters.
FORMS = NO_REPLY_FORMS


@pytest.mark.parametrize(("text", "shown"), FORMS)
def test_visible_text_forms(text: str, shown: str | None) -> None:
    assert visible_text(text) == shown


def stream(text: str, step: int) -> tuple[str, list[str]]:
    guard = NoReplyStreamGuard()
    parts = [guard.feed(text[i : i + step]) for i in range(0, len(text), step)]
    parts.append(guard.finish())
    return "".join(parts), parts


@pytest.mark.parametrize(("text", "shown"), FORMS)
@pytest.mark.parametrize("step", [1, 2, 3, 5, 1000])
def test_stream_guard_forms(text: str, shown: str | None, step: int) -> None:
    out, parts = stream(text, step)
    assert out.strip() == (shown or "")
    if shown is None:
        assert all(p == "" for p in parts)


def test_stream_guard_holds_only_what_could_become_the_token() -> None:
    guard = NoReplyStreamGuard()
    assert guard.feed("NO") == "" and guard.suppressed  # could still be NO_REPLY
    assert guard.feed(", I disagree") == "NO, I disagree"
    assert guard.finish() == ""
    late = NoReplyStreamGuard()
    assert late.feed("Saved it. NO_RE") == "Saved it."
    assert late.feed("PLY") == "" and late.finish() == ""


@settings(max_examples=300, deadline=None)
@given(
    body=st.text(max_size=60),
    token=st.sampled_from(["", NO_REPLY, "no_reply", "**NO_REPLY**", "NO_REPLY."]),
    where=st.sampled_from(["alone", "before", "after"]),
    cuts=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=20),
)
def test_stream_guard_matches_the_final_rules(
    body: str, token: str, where: str, cuts: list[int]
) -> None:
    """Whatever the chunking, a stream shows what the final reply would show, and never
    a piece of a silent reply."""
    text = {"alone": token or body, "before": f"{token} {body}", "after": f"{body} {token}"}[
        where
    ]
    guard = NoReplyStreamGuard()
    parts: list[str] = []
    pos = 0
    i = 0
    while pos < len(text):
        step = cuts[i % len(cuts)]
        parts.append(guard.feed(text[pos : pos + step]))
        pos += step
        i += 1
    parts.append(guard.finish())
    out = "".join(parts)
    expected = visible_text(text)
    if expected is None:
        assert out.strip() == ""
    else:
        assert out.strip() == expected.strip()
