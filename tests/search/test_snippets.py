"""Snippets: at most 700 UTF-16 units centred on the best-matching lines."""

from __future__ import annotations

import math
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.search.snippets import _cut_long_line, build_snippet, build_snippets
from memmw.text.analysis import query_terms, terms, utf16_len


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


def test_line_scores_do_not_depend_on_the_hash_seed() -> None:
    # Summing idf weights in set order made equal lines tie differently from one process
    # to the next (string hashing is salted per process), so snippets moved between runs.
    import os
    import subprocess
    import sys

    code = (
        "from memmw.search.snippets import _line_score;"
        "w={'alpha':0.1,'beta':0.2,'gamma':0.3,'delta':0.7,'omega':1e-17};"
        "print(repr(_line_score('alpha beta gamma delta omega', set(w), w.__getitem__)))"
    )
    outputs = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in range(8)
    }
    assert len(outputs) == 1


# -- the fast line scoring equals the straightforward one --------------------------------


def reference_snippet(
    text: str,
    piece_lines: list[int],
    query: list[str],
    idf: Callable[[str], float],
    max_chars: int,
) -> tuple[str, int, int]:
    """The snippet as first written: ``terms`` of every line, options sorted each step."""
    pieces = text.split("\n")
    if len(pieces) != len(piece_lines):
        piece_lines = list(range(piece_lines[0], piece_lines[0] + len(pieces)))
    qset = set(query)
    scores = [
        math.fsum(idf(t) for t in qset.intersection(terms(p))) if qset else 0.0 for p in pieces
    ]
    best = max(range(len(pieces)), key=lambda i: (scores[i], -i))
    if utf16_len(pieces[best]) > max_chars:
        shown = _cut_long_line(pieces[best], list(qset), max_chars)
        return shown, piece_lines[best], piece_lines[best]
    lo = hi = best
    used = utf16_len(pieces[best])
    while True:
        options = []
        if lo > 0:
            options.append((scores[lo - 1], 0, lo - 1))
        if hi + 1 < len(pieces):
            options.append((scores[hi + 1], 1, hi + 1))
        grown = False
        below, above = hi - best, best - lo
        for _score, _after, idx in sorted(
            options, key=lambda o: (-o[0], (below if o[1] else above + 1))
        ):
            cost = utf16_len(pieces[idx]) + 1
            if used + cost <= max_chars:
                used += cost
                lo, hi = min(lo, idx), max(hi, idx)
                grown = True
                break
        if not grown:
            break
    return "\n".join(pieces[lo : hi + 1]).strip("\n"), piece_lines[lo], piece_lines[hi]


# Stem families, case variants, punctuation glued to words; then (not ASCII) accents,
# combining marks, ligatures and full-width letters (NFKC turns "ﬁ" into "fi" and "Ｐ"
# into "P"), CJK and emoji.
_ASCII_WORDS = (
    "paint painted painting Paints PAINT happy happiness happily ties tied tie the a "
    "caroline Caroline's support_group 2023 x1 cafe fish strasse"
).split()
_OTHER_WORDS = "é café cafe\u0301 ﬁsh Ｐaint 東京 会議 😀 straße ΣΙΣΥΦΟΣ".split()
_ASCII_GLUE = [" ", "  ", ", ", ". ", "-", "_", "'", "\t", "\r", "!"]


@st.composite
def _chunk(draw: st.DrawFn) -> str:
    """Chunk text: all ASCII (the fast path) or not, with a few odd characters."""
    ascii_only = draw(st.booleans())
    words = st.sampled_from(_ASCII_WORDS if ascii_only else _ASCII_WORDS + _OTHER_WORDS)
    glue = st.sampled_from(_ASCII_GLUE if ascii_only else [*_ASCII_GLUE, " — ", "\u00a0"])
    extra = st.text(st.characters(max_codepoint=127 if ascii_only else 0x10FFFF), max_size=3)
    longest = draw(st.sampled_from([2, 5, 12]))  # words per line: short lines tie often
    lines = [
        "".join(w + g for w, g in draw(st.lists(st.tuples(words, glue), max_size=longest)))
        + draw(extra)
        for _ in range(draw(st.integers(1, 14)))
    ]
    return "\n".join(lines)


@settings(max_examples=300, deadline=None)
@given(
    text=_chunk(),
    query=st.lists(st.sampled_from(_ASCII_WORDS + _OTHER_WORDS), max_size=4),
    weights=st.lists(
        st.floats(0.0, 10.0) | st.sampled_from([1e-17, 0.1, 0.2, 0.3]), min_size=8, max_size=8
    ),
    max_chars=st.integers(1, 200) | st.just(700),
    shift=st.integers(0, 1),
)
def test_build_snippet_equals_the_reference(
    text: str, query: list[str], weights: list[float], max_chars: int, shift: int
) -> None:
    """Same text, lines and citations as scoring every line with ``terms``."""
    q_terms = query_terms(" ".join(query))
    table = {t: weights[i % len(weights)] for i, t in enumerate(q_terms)}

    def idf(term: str) -> float:
        return table.get(term, 0.0)

    # shift=1: a line map of the wrong length (the defensive consecutive numbering).
    piece_lines = list(range(3, 3 + text.count("\n") + 1 + shift))
    snip = build_snippet(text, piece_lines, q_terms, idf=idf, max_chars=max_chars)
    assert (snip.text, snip.start_line, snip.end_line) == reference_snippet(
        text, piece_lines, q_terms, idf, max_chars
    )


# -- a second window of the same chunk ----------------------------------------------------


def test_second_window_shows_the_other_matching_region() -> None:
    text, piece_lines = lines_of(
        60, {10: "The zeppelin hangar code is 4471.", 50: "The hangar roof leaks."}
    )
    first, second = build_snippets(
        text, piece_lines, query_terms("zeppelin hangar"), idf=flat_idf, count=2
    )
    assert first == build_snippet(text, piece_lines, query_terms("zeppelin hangar"), idf=flat_idf)
    assert "zeppelin hangar code" in first.text and "roof leaks" not in first.text
    assert "The hangar roof leaks." in second.text
    assert second.start_line > first.end_line
    assert second.text == "\n".join(text.split("\n")[second.start_line - 1 : second.end_line])


def test_no_second_window_when_nothing_else_matches() -> None:
    text, piece_lines = lines_of(60, {10: "The zeppelin hangar code is 4471."})
    assert len(build_snippets(text, piece_lines, ["zeppelin"], idf=flat_idf, count=2)) == 1
    short = "# Title\nThe gateway runs on port 8080.\nThe gateway again."
    assert len(build_snippets(short, [1, 2, 3], ["gateway"], idf=flat_idf, count=2)) == 1


@settings(max_examples=300, deadline=None)
@given(
    text=_chunk(),
    query=st.lists(st.sampled_from(_ASCII_WORDS + _OTHER_WORDS), max_size=4),
    weights=st.lists(st.floats(0.0, 10.0) | st.just(0.0), min_size=8, max_size=8),
    max_chars=st.integers(1, 200) | st.just(700),
)
def test_second_window_never_repeats_the_first(
    text: str, query: list[str], weights: list[float], max_chars: int
) -> None:
    """The first window is build_snippet's; a second one shows only lines the first does
    not, within the budget, exactly its cited lines, and exists iff such a line matches."""
    q_terms = query_terms(" ".join(query))
    table = {t: weights[i % len(weights)] for i, t in enumerate(q_terms)}

    def idf(term: str) -> float:
        return table.get(term, 0.0)

    pieces = text.split("\n")
    piece_lines = list(range(3, 3 + len(pieces)))
    snips = build_snippets(text, piece_lines, q_terms, idf=idf, max_chars=max_chars, count=2)
    assert snips[0] == build_snippet(text, piece_lines, q_terms, idf=idf, max_chars=max_chars)
    first = snips[0]
    outside = [
        i for i, line in enumerate(piece_lines) if not first.start_line <= line <= first.end_line
    ]
    qset = set(q_terms)
    matching = [i for i in outside if math.fsum(idf(t) for t in qset.intersection(terms(pieces[i]))) > 0]
    assert len(snips) == (2 if matching else 1)
    if len(snips) == 2:
        second = snips[1]
        assert second.end_line < first.start_line or second.start_line > first.end_line
        assert utf16_len(second.text) <= max_chars
        if second.start_line != second.end_line or utf16_len(pieces[second.start_line - 3]) <= max_chars:
            window = "\n".join(pieces[second.start_line - 3 : second.end_line - 2]).strip("\n")
            assert second.text == window
