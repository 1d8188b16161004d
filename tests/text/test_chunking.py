"""Chunking: the reference line algorithm, CJK weights, long lines, per-entry mode."""

from __future__ import annotations

import hashlib

from memmw.text.analysis import weight
from memmw.text.chunking import CHUNKING_VERSION, chunk_text, sha256_text, strip_carriers


def spans(chunks) -> list[tuple[int, int]]:
    return [(c.start_line, c.end_line) for c in chunks]


def numbered(n: int) -> str:
    return "".join(f"line-{i:04d}\n" for i in range(1, n + 1))  # 9 chars per line


def test_small_text_is_one_chunk_with_sha256() -> None:
    text = "# Title\n\nSome words here.\n"
    (chunk,) = chunk_text(text)
    assert (chunk.start_line, chunk.end_line) == (1, 3)
    assert chunk.text == "# Title\n\nSome words here."
    assert chunk.hash == hashlib.sha256(chunk.text.encode("utf-8")).hexdigest()
    assert chunk.hash == sha256_text(chunk.text)
    assert chunk.line_map is None
    assert chunk.piece_lines() == [1, 2, 3]
    assert chunk.importance is None


def test_lines_pack_to_the_budget_with_overlap_carry() -> None:
    # tokens=10 -> 40 weighted chars; each line costs 9 + 1 -> 4 lines per chunk.
    # overlap=2 -> 8 chars: the last line (cost 10 >= 8) is carried into the next chunk.
    chunks = chunk_text(numbered(10), tokens=10, overlap=2)
    assert spans(chunks) == [(1, 4), (4, 7), (7, 10)]
    assert chunks[1].text.splitlines() == ["line-0004", "line-0005", "line-0006", "line-0007"]


def test_overlap_carry_can_span_several_lines() -> None:
    # overlap=5 -> 20 chars: two lines (cost 20) are carried.
    chunks = chunk_text(numbered(8), tokens=10, overlap=5)
    assert spans(chunks) == [(1, 4), (3, 6), (5, 8)]


def test_zero_overlap_clears_the_buffer() -> None:
    assert spans(chunk_text(numbered(10), tokens=10, overlap=0)) == [(1, 4), (5, 8), (9, 10)]


def test_default_budget_is_1600_weighted_chars() -> None:
    line = "a" * 99  # cost 100
    chunks = chunk_text((line + "\n") * 40, overlap=0)
    assert spans(chunks) == [(1, 16), (17, 32), (33, 40)]
    assert all(weight(c.text) <= 1600 for c in chunks)


def test_cjk_is_weighted_about_one_token_per_char() -> None:
    cjk_line = "漢" * 50  # weight 200, cost 201: one per 400-char chunk
    latin_line = "a" * 50  # cost 51: seven per chunk
    assert spans(chunk_text((cjk_line + "\n") * 3, tokens=100, overlap=0)) == [(1, 1), (2, 2), (3, 3)]
    assert spans(chunk_text((latin_line + "\n") * 8, tokens=100, overlap=0)) == [(1, 7), (8, 8)]


def test_long_latin_line_is_split_into_budget_pieces() -> None:
    line = "".join(chr(ord("a") + i % 26) for i in range(5000))
    chunks = chunk_text(f"{line}\nafter\n")
    assert [len(c.text) for c in chunks[:3]] == [1600, 1600, 1600]
    assert all(c.start_line == c.end_line == 1 for c in chunks[:3])
    assert "".join(c.text for c in chunks[:4]).startswith(line[:4800])
    assert chunks[-1].text.endswith("after")
    assert chunks[-1].end_line == 2
    assert "".join(c.text.split("\nafter")[0] for c in chunks).startswith(line)


def test_long_cjk_line_is_split_by_weight_without_breaking_code_points() -> None:
    wide = "\U00020000"  # outside the BMP: a surrogate pair in UTF-16
    line = ("漢字かなカナ한글" + wide) * 200  # 2000 code points
    chunks = chunk_text(line)
    assert len(chunks) >= 5
    assert "".join(c.text for c in chunks) == line
    for c in chunks:
        assert (c.start_line, c.end_line) == (1, 1)
        assert weight(c.text) <= 1600
        c.text.encode("utf-8")  # would raise on a lone surrogate
        assert c.text.encode("utf-16-le").decode("utf-16-le") == c.text


def test_crlf_and_cr_are_normalised() -> None:
    lf = chunk_text("alpha\nbeta\n\ngamma\n")
    crlf = chunk_text("alpha\r\nbeta\r\n\r\ngamma\r\n")
    cr = chunk_text("alpha\rbeta\r\rgamma\r")
    assert [(c.text, c.hash, c.start_line, c.end_line) for c in crlf] == [
        (c.text, c.hash, c.start_line, c.end_line) for c in lf
    ]
    assert [c.hash for c in cr] == [c.hash for c in lf]
    assert "\r" not in crlf[0].text
    assert lf[0].end_line == 4  # the trailing newline adds no line


def test_blank_chunks_are_dropped() -> None:
    assert chunk_text("") == []
    assert chunk_text("\n\n\n") == []
    assert chunk_text("   \n\t\n") == []


def test_chunks_are_stable() -> None:
    text = numbered(300) + "".join(chr(0x4E00 + i) for i in range(1000)) + "\n"
    first = chunk_text(text)
    second = chunk_text(text)
    assert [(c.start_line, c.end_line, c.hash, c.text) for c in first] == [
        (c.start_line, c.end_line, c.hash, c.text) for c in second
    ]
    assert len({c.hash for c in first}) == len(first)


def test_repeated_long_line_gives_identical_pieces() -> None:
    # Same line, same text: the store must cope with chunks that share lines and hash.
    chunks = chunk_text("=" * 4000)
    assert spans(chunks) == [(1, 1), (1, 1), (1, 1)]
    assert chunks[0].hash == chunks[1].hash != chunks[2].hash


MEMORY_MD = """\
# Facts
- Alpha fact
  continued on a second line
- Beta fact <!-- importance: 8 -->
## Section
plain line <!-- importance: 3 --> <!-- trigger: cats -->
#hashtag is not a heading
- Gamma <!-- importance: 42 --> <!-- importance: 2 -->
"""


def test_per_entry_mode_starts_a_chunk_at_each_entry() -> None:
    chunks = chunk_text(MEMORY_MD, per_entry=True)
    # "# Facts" has no text of its own: it joins the entry under it.
    assert spans(chunks) == [(1, 3), (4, 4), (5, 7), (8, 8)]
    assert [c.text for c in chunks] == [
        "# Facts\n- Alpha fact\n  continued on a second line",
        "- Beta fact",
        "## Section\nplain line\n#hashtag is not a heading",
        "- Gamma",
    ]
    assert [c.importance for c in chunks] == [None, 8, 3, 10]


def test_heading_only_entries_carry_their_section_into_the_next_entry() -> None:
    text = "# User\n\n## Health\n- Allergic to peanuts.\n- Prefers tea.\n# Empty\n"
    chunks = chunk_text(text, per_entry=True)
    assert [c.text for c in chunks] == [
        "# User\n\n## Health\n- Allergic to peanuts.",
        "- Prefers tea.",
        "# Empty",  # a heading with nothing under it stays (nothing to join)
    ]
    assert spans(chunks) == [(1, 4), (5, 5), (6, 6)]


def test_per_entry_mode_has_no_overlap_across_entries() -> None:
    entries = "".join(f"- entry {i} " + "word " * 30 + "\n" for i in range(6))
    chunks = chunk_text(entries, tokens=50, overlap=40, per_entry=True)
    assert spans(chunks) == [(i, i) for i in range(1, 7)]


def test_long_entry_fragments_inherit_the_importance() -> None:
    body = "- Big entry <!-- importance: 9 -->\n" + "".join(f"  detail {i} " + "x" * 60 + "\n" for i in range(40))
    chunks = chunk_text(body + "- Next\n", tokens=100, overlap=10, per_entry=True)
    assert len(chunks) > 3
    assert {c.importance for c in chunks[:-1]} == {9}
    assert chunks[-1].importance is None
    assert chunks[-1].text == "- Next"


def test_without_per_entry_carriers_are_stripped_but_not_scored() -> None:
    (chunk,) = chunk_text(MEMORY_MD)
    assert "<!--" not in chunk.text
    assert "- Beta fact\n" in chunk.text
    assert chunk.importance is None


def test_strip_carriers() -> None:
    assert strip_carriers("plain") == ("plain", None)
    assert strip_carriers("x <!-- importance: 7 -->  ") == ("x", 7)
    assert strip_carriers("x <!-- Importance:0 -->") == ("x", 1)
    assert strip_carriers("x <!-- importance: high -->") == ("x", None)
    assert strip_carriers("x <!-- project: github.com/a/b --> y") == ("x y", None)
    # Ordinary comments are content.
    assert strip_carriers("x <!-- just a note -->") == ("x <!-- just a note -->", None)


def test_chunking_version_is_the_per_entry_one() -> None:
    assert CHUNKING_VERSION == 5
