"""The one definition of a line (memmw.text.lines)."""

from __future__ import annotations

import sys

from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.text.lines import (
    LINE_BREAKS,
    NOT_LINE_BREAKS,
    split_line_bytes,
    split_lines,
    split_lines_keepends,
)

#: Text made mostly of every character anyone might call a line break.
BREAKY = st.lists(
    st.sampled_from(["a", "é", "字", " ", "\n", "\r", "\r\n", *NOT_LINE_BREAKS]), max_size=60
).map("".join)


def test_only_cr_lf_and_crlf_end_a_line() -> None:
    assert split_lines("a\nb\r\nc\rd") == ["a", "b", "c", "d"]
    assert split_lines("a\n") == ["a"] and split_lines("a\n\n") == ["a", ""]
    assert split_lines("") == [] and split_lines("\n") == [""]
    for ch in NOT_LINE_BREAKS:
        assert split_lines(f"x{ch}y\n") == [f"x{ch}y"], repr(ch)
    assert LINE_BREAKS == ("\r\n", "\r", "\n")


def test_not_line_breaks_are_exactly_the_other_splitlines_breaks() -> None:
    breaking = {
        chr(c) for c in range(sys.maxunicode + 1)
        if not 0xD800 <= c <= 0xDFFF and len(f"a{chr(c)}b".splitlines()) == 2
    }
    assert breaking - {"\n", "\r"} == set(NOT_LINE_BREAKS)


@settings(max_examples=300, deadline=None)
@given(BREAKY)
def test_bytes_and_text_are_cut_at_the_same_places(text: str) -> None:
    lines = split_lines(text)
    assert [b.decode("utf-8") for b in split_line_bytes(text.encode("utf-8"))] == lines
    # Joining the lines back with any terminator gives the same lines.
    assert split_lines("\n".join(lines) + ("\n" if lines else "")) == lines
    assert all("\n" not in line and "\r" not in line for line in lines)


@settings(max_examples=300, deadline=None)
@given(BREAKY)
def test_lines_with_their_ends_rebuild_the_text(text: str) -> None:
    kept = split_lines_keepends(text)
    assert "".join(kept) == text
    assert [line.rstrip("\r\n") for line in kept] == split_lines(text)
