"""Windows of a memory file as ``memory_get`` returns them (line and character budgets)."""

from __future__ import annotations

from memmw.text.analysis import cut_utf16, utf16_len
from memmw.text.lines import split_lines
from memmw.types import ReadResult


def read_window(
    path: str,
    text: str,
    from_line: int | None,
    lines: int | None,
    *,
    max_lines: int,
    max_chars: int,
) -> ReadResult:
    """Cut ``text`` to the requested window within the line and character budgets.

    Args:
        path: Workspace-relative path reported in the result.
        text: The whole file.
        from_line: First line to show (1-based; default 1).
        lines: Lines wanted (default and cap: ``max_lines``).
        max_lines: Line budget.
        max_chars: Character budget in UTF-16 units; a single longer line is hard-cut.

    Returns:
        The window, with a ``[truncated: ...]`` notice and ``next_from`` when more follows.
    """
    all_lines = split_lines(text)  # the lines the chunker numbered (memmw.text.lines)
    total = len(all_lines)
    start = max(1, int(from_line or 1))
    want = min(max_lines, max(1, int(lines))) if lines is not None else max_lines
    window = all_lines[start - 1 : start - 1 + want]
    shown: list[str] = []
    used = 0
    cut_line = False
    for line in window:
        cost = utf16_len(line) + (1 if shown else 0)
        if used + cost > max_chars:
            if not shown:  # one huge line: hard-cut it
                shown.append(cut_utf16(line, max_chars))
                cut_line = True
            break
        shown.append(line)
        used += cost
    end = start + len(shown) - 1
    more = end < total
    body = "\n".join(shown)
    # A single line longer than the budget is shown cut; continuing moves to the next
    # line (line-based reads cannot resume inside a line), and the notice says so.
    next_from = end + 1 if more else None
    notes = []
    if cut_line:
        notes.append(f"line {end} was cut at {max_chars} characters")
    if more:
        notes.append(f"showed lines {start}-{end} of {total}; continue with from={next_from}")
    if notes:
        body += "\n\n[truncated: " + "; ".join(notes) + "]"
    return ReadResult(
        path=path,
        text=body,
        status="ok",
        from_line=start,
        lines=len(shown),
        total_lines=total,
        truncated=more or cut_line,
        next_from=next_from,
    )
