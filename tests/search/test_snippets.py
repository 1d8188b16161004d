"""Snippets: at most 700 UTF-16 units centred on the best-matching lines."""

from __future__ import annotations

from memmw.search.snippets import build_snippet
from memmw.text.analysis import query_terms, utf16_len


def flat_idf(_term: str) -> float:
    return 1.0


def lines_of(n: int, special: dict[int, str]) -> tuple[str, list[int]]:
    pieces = [special.get(i, f"filler line number {i} about nothing in particular") for i in range(1, n + 1)]
    return "\n".join(pieces), list(range(1, n + 1))


def test_short_chunk_is_shown_whole() -> None:
    text = "# Title\nThe gateway runs on port 8080.\nMore."
    snip = build_snippet(text, [10, 11, 12], query_terms("gateway"), idf=flat_idf)
    assert (snip.text, snip.start_line, snip.end_line) == (text, 10, 12)


def test_window_is_centred_on_the_best_line_and_describes_its_lines() -> None:
    text, piece_lines = lines_of(60, {40: "The zeppelin hangar code is 4471."})
    snip = build_snippet(text, piece_lines, query_terms("zeppelin hangar"), idf=flat_idf)
    assert utf16_len(snip.text) <= 700
    assert "zeppelin hangar code is 4471" in snip.text
    assert snip.start_line <= 40 <= snip.end_line
    assert snip.end_line - snip.start_line >= 10  # the window grew to the budget
    shown = text.split("\n")[snip.start_line - 1 : snip.end_line]
    assert snip.text == "\n".join(shown)


def test_window_grows_on_both_sides_of_the_best_line() -> None:
    text, piece_lines = lines_of(60, {40: "The zeppelin hangar code is 4471."})
    snip = build_snippet(text, piece_lines, query_terms("zeppelin hangar"), idf=flat_idf)
    assert 40 - snip.start_line >= 3
    assert snip.end_line - 40 >= 3


def test_budget_is_respected_for_other_sizes() -> None:
    text, piece_lines = lines_of(100, {70: "needle here"})
    for budget in (80, 200, 700, 1500):
        snip = build_snippet(text, piece_lines, ["needl"], idf=flat_idf, max_chars=budget)
        assert utf16_len(snip.text) <= budget
        assert "needle here" in snip.text
        assert snip.text == "\n".join(text.split("\n")[snip.start_line - 1 : snip.end_line])


def test_rarer_terms_pick_the_line() -> None:
    text, piece_lines = lines_of(40, {5: "common word", 30: "rare word"})
    idf = {"common": 0.1, "rare": 5.0}.get
    snip = build_snippet(text, piece_lines, ["common", "rare"], idf=lambda t: idf(t) or 0.0, max_chars=100)
    assert "rare word" in snip.text
    assert snip.start_line <= 30 <= snip.end_line
    assert "common word" not in snip.text


def test_no_match_shows_the_start() -> None:
    text, piece_lines = lines_of(50, {})
    snip = build_snippet(text, piece_lines, ["absent"], idf=flat_idf)
    assert snip.start_line == 1
    assert snip.text.startswith("filler line number 1 ")
    assert utf16_len(snip.text) <= 700


def test_long_line_is_cut_around_the_match() -> None:
    line = "lorem ipsum " * 150 + "the zeppelin is here " + "dolor sit " * 150
    snip = build_snippet(f"first\n{line}\nlast", [7, 8, 9], ["zeppelin"], idf=flat_idf)
    assert (snip.start_line, snip.end_line) == (8, 8)
    assert "zeppelin" in snip.text
    assert utf16_len(snip.text) == 700
    assert snip.text in line


def test_long_line_cut_never_splits_a_surrogate_pair() -> None:
    emoji = "\U0001f600"
    line = emoji * 1000
    snip = build_snippet(line, [3], ["x"], idf=flat_idf, max_chars=701)
    assert snip.text == emoji * 350
    snip.text.encode("utf-8")


def test_split_line_pieces_keep_their_line_numbers() -> None:
    text = "a" * 400 + "\n" + "b needle " * 10 + "\n" + "c" * 300
    snip = build_snippet(text, [5, 5, 6], ["needl"], idf=flat_idf, max_chars=200)
    assert (snip.start_line, snip.end_line) == (5, 5)
    assert snip.text.startswith("b needle")
