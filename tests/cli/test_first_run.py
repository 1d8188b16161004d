"""A new user's first commands: what they print must be true and say what to do next."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memmw.cli import main
from memmw.cli.common import EXIT_ERROR, EXIT_NOTHING, EXIT_OK
from memmw.workspace.reads import read_window

from .test_cli import make_workspace, run


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


# -- memmw mcp without the extra ------------------------------------------------------------
def test_mcp_without_the_extra_prints_the_install_hint(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name.split(".")[0] in ("mcp", "anyio"):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "mcp", None)  # import mcp -> ImportError
    monkeypatch.setitem(sys.modules, "anyio", None)
    code, out, err = run(capsys, "-w", str(ws), "--state-dir", str(tmp_path / "st"), "mcp")
    assert code == EXIT_ERROR, err
    assert "memmw[mcp]" in err and "internal error" not in err and "anyio" not in err


# -- memmw get past the end ---------------------------------------------------------------------
def test_get_from_past_the_end_says_how_many_lines_and_fails(
    ws: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, out, err = run(capsys, *base, "get", "USER.md", "--from", "50")
    assert code == EXIT_ERROR
    assert out == ""
    assert "USER.md has 3 lines" in err and "--from 50" in err
    code, out, _ = run(capsys, *base, "get", "USER.md", "--from", "3")
    assert code == EXIT_OK and out == "- Prefers short answers.\n"
    code, out, _ = run(capsys, *base, "get", "USER.md", "--from", "4", "--json")
    payload = json.loads(out)
    assert code == EXIT_ERROR and payload["pastEnd"] is True and payload["totalLines"] == 3


@settings(max_examples=200, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(exclude_characters="\r\n"), max_size=8), max_size=12),
    from_line=st.integers(min_value=1, max_value=20),
    want=st.one_of(st.none(), st.integers(min_value=1, max_value=20)),
)
def test_a_window_is_empty_exactly_when_it_starts_past_the_end(
    lines: list[str], from_line: int, want: int | None
) -> None:
    text = "".join(f"{line}\n" for line in lines)
    result = read_window("MEMORY.md", text, from_line, want, max_lines=120, max_chars=12000)
    assert result.total_lines == len(lines)
    assert result.past_end == (from_line > max(len(lines), 1))
    assert (result.lines == 0) == (result.past_end or not lines)
    assert ("pastEnd" in result.to_payload()) == result.past_end


# -- memmw index with nothing to index ----------------------------------------------------------
@pytest.mark.parametrize("layout", ["no-files", "empty-files"])
def test_index_with_nothing_to_index_says_what_it_looked_for(
    layout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    if layout == "empty-files":
        (ws / "MEMORY.md").write_text("", encoding="utf-8")
    base = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, _out, err = run(capsys, *base, "index")
    assert code == EXIT_NOTHING, err
    assert "nothing to index" in err and "MEMORY.md, USER.md and memory/**/*.md" in err
    assert ("all empty" in err) == (layout == "empty-files")
    code, out, _ = run(capsys, *base, "index", "--json")
    assert code == EXIT_NOTHING and "nothing to index" in json.loads(out)["nothingToIndex"]
    (ws / "memory" / "2026-01-02.md").write_text("A first note.\n", encoding="utf-8")
    code, out, _ = run(capsys, *base, "index", "--json")
    assert code == EXIT_OK and json.loads(out)["nothingToIndex"] is None
