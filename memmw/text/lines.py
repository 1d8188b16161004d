"""What a line is: the one definition every line number in memmw counts by.

A line ends at ``\\r\\n``, ``\\r`` or ``\\n``; a terminator at the very end of the text adds
no line. Nothing else ends a line: the other characters :meth:`str.splitlines` breaks on
(:data:`NOT_LINE_BREAKS`: vertical tab, form feed, the separators ``\\x1c``-``\\x1e``,
NEL ``\\x85``, LINE SEPARATOR ``\\u2028``, PARAGRAPH SEPARATOR ``\\u2029``) are ordinary
characters inside a line, as they are for ``git``, ``grep``, ``wc -l`` and editors' line
numbers, and as JSON strings may hold them raw (``json.dumps(..., ensure_ascii=False)``
writes ``\\u2028`` unescaped), so a JSONL record is always one line.

The chunker (:mod:`memmw.text.chunking`), ``memory_get`` windows
(:mod:`memmw.workspace.reads`), transcripts (:mod:`memmw.workspace.transcripts`) and so
the indexer's line numbers and citations all split with :func:`split_lines` (or
:func:`split_line_bytes` for undecoded bytes, which cuts at the same places: ``\\r`` and
``\\n`` never occur inside a multi-byte UTF-8 sequence).
"""

from __future__ import annotations

import re

#: Line terminators, longest first.
LINE_BREAKS = ("\r\n", "\r", "\n")
#: Characters :meth:`str.splitlines` treats as line breaks that are NOT line breaks here.
NOT_LINE_BREAKS = "\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"

#: A line terminator in undecoded bytes (the same cuts as :func:`split_lines`).
LINE_BREAK = re.compile(rb"\r\n|\r|\n")

_LINE_WITH_END = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def split_lines(text: str) -> list[str]:
    """The lines of ``text`` (terminators removed); line ``n`` is ``split_lines(text)[n - 1]``.

    >>> split_lines("a\\r\\nb\\u2028c\\rd\\n")
    ['a', 'b\\u2028c', 'd']
    >>> split_lines("")
    []
    """
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()  # a trailing terminator adds no line
    return lines


def split_line_bytes(data: bytes) -> list[bytes]:
    """:func:`split_lines` for UTF-8 bytes, before decoding (same cuts, same numbering)."""
    lines = data.replace(b"\r\n", b"\n").replace(b"\r", b"\n").split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return lines


def split_lines_keepends(text: str) -> list[str]:
    """:func:`split_lines` with each line's own terminator kept, for rewriting a line.

    ``"".join(split_lines_keepends(text)) == text``, and stripping the terminators gives
    :func:`split_lines`, so a writer can replace line ``n`` and keep every other byte.

    >>> split_lines_keepends("a\\r\\nb\\u2028c\\rd")
    ['a\\r\\n', 'b\\u2028c\\r', 'd']
    """
    return _LINE_WITH_END.findall(text)


def line_spans(data: bytes) -> list[tuple[int, int, int]]:
    """``(start, content end, end with its line break)`` of each line of ``data``.

    Line ``n`` (1-based) is ``data[spans[n-1][0]:spans[n-1][1]]``; the same lines as
    :func:`split_line_bytes`, with their offsets, for a writer that rewrites one line.
    """
    spans: list[tuple[int, int, int]] = []
    start = 0
    for m in LINE_BREAK.finditer(data):
        spans.append((start, m.start(), m.end()))
        start = m.end()
    if start < len(data):
        spans.append((start, len(data), len(data)))
    return spans
