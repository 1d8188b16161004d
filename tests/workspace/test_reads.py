"""Windows of memory files: line and UTF-16 character budgets."""

from __future__ import annotations

from memmw.workspace.reads import read_window


def test_read_window_counts_utf16_units() -> None:
    emoji = "\U0001f600"
    got = read_window(
        "memory/e.md", f"{emoji * 10}\nnext\n", None, None, max_lines=120, max_chars=100
    )
    assert got.lines == 2
    cut = read_window("memory/e.md", emoji * 200, None, None, max_lines=120, max_chars=101)
    assert cut.text.split("\n\n")[0] == emoji * 50
