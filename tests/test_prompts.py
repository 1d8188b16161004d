"""The Memory Recall section, flush prompts and NO_REPLY handling."""

from __future__ import annotations

import datetime as dt

import pytest

from memmw.prompts import (
    RECALL_HEADING,
    append_section,
    flush_system_prompt,
    flush_user_prompt,
    is_silent_reply,
    memory_recall_section,
    strip_no_reply,
)


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
        ('{"action": "NO_REPLY", "x": 1}', False),
        ("", False),
        (None, False),
    ],
)
def test_is_silent_reply(text: str | None, silent: bool) -> None:
    assert is_silent_reply(text) is silent


def test_strip_no_reply() -> None:
    assert strip_no_reply("Done. NO_REPLY") == "Done."
    assert strip_no_reply("NO_REPLY: done") == "done"
