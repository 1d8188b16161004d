"""benchmarks/scale.py: the workspace generators, the table and the side-by-side harness."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_scale", ROOT / "benchmarks" / "scale.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def fake_locomo(root: Path) -> Path:
    """A two-conversation stand-in with the LoCoMo folder layout (no real data)."""
    for conv, speaker in (("conv-1", "Ana"), ("conv-2", "Bo")):
        notes = root / "workspaces" / conv / "memory"
        notes.mkdir(parents=True)
        for session in (1, 2):
            turns = [f"- [D{session}:{t}] {speaker}: turn {t} about kayaks" for t in range(30)]
            (notes / f"2023-05-0{session}-session-{session}.md").write_text(
                "\n".join([f"# {conv} - session {session}", "", "Date: 2023", "", *turns]) + "\n",
                encoding="utf-8",
            )
    lines = [json.dumps({"conv": "conv-1", "query": f"question {i}?"}) for i in range(8)]
    (root / "queries.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def test_locomo_workspace_is_dated_notes_of_turns_and_deterministic(
    scale: ModuleType, tmp_path: Path
) -> None:
    data = fake_locomo(tmp_path / "data")
    scale.generate_locomo(tmp_path / "a", data, 5, 2000, seed=3)
    scale.generate_locomo(tmp_path / "b", data, 5, 2000, seed=3)
    notes = sorted((tmp_path / "a" / "memory").glob("*.md"))
    assert [n.name for n in notes] == [
        "2026-06-26.md", "2026-06-27.md", "2026-06-28.md", "2026-06-29.md", "2026-06-30.md"
    ]  # fmt: skip
    for note in notes:
        text = note.read_text(encoding="utf-8")
        assert text == (tmp_path / "b" / "memory" / note.name).read_text(encoding="utf-8")
        assert text.startswith(f"# {note.stem}\n")
        body = [ln for ln in text.splitlines()[1:] if ln and not ln.startswith("## ")]
        assert body and all(ln.startswith("- [D") for ln in body)
        # Sizes vary from 0.5x to 1.5x the mean (plus the last run of turns).
        assert 1000 <= len(text) <= 2 * 3000
    # Turns from both conversations are mixed in.
    every = "".join(n.read_text(encoding="utf-8") for n in notes)
    assert "Ana:" in every and "Bo:" in every
    scale.generate_locomo(tmp_path / "c", data, 5, 2000, seed=4)
    assert (tmp_path / "c" / "memory" / notes[0].name).read_text(encoding="utf-8") != notes[
        0
    ].read_text(encoding="utf-8")


def test_locomo_queries_are_a_seeded_sample(scale: ModuleType, tmp_path: Path) -> None:
    data = fake_locomo(tmp_path)
    sample = scale.locomo_queries(data, 5, seed=1)
    assert sample == scale.locomo_queries(data, 5, seed=1)
    assert len(set(sample)) == 5 and all(q.startswith("question ") for q in sample)
    assert len(scale.locomo_queries(data, 20, seed=1)) == 20  # more than there are: repeats


def test_table_has_a_column_per_checkout_and_ratios(scale: ModuleType) -> None:
    report = {
        "queries": {"n": 300, "fresh": 20, "cli": 20},
        "results": {
            "before": {"full_s": 10.0, "cli_identical": 5, "prepare_s": 2.0},
            "after": {"full_s": 4.0, "cli_identical": 20, "prepare_s": None},
        },
    }
    lines = scale.table(report).splitlines()
    assert lines[0] == "|  | before | after | after / before |"
    rows = {ln.split(" | ")[0].lstrip("| "): ln for ln in lines[2:]}
    assert rows["full index, `sync(force=True)` (s)"].endswith("| 10.0 | 4.0 | 0.40x |")
    assert rows["CLI = library: identical top-6 lists"].endswith("| 5/20 | 20/20 |  |")
    assert rows["`prepare()` (s)"].endswith("| 2.00 | n/a |  |")
    assert not any("p95" in row for row in rows)  # figures nobody measured are left out


def test_cli_payload_gives_paths_and_lines(scale: ModuleType) -> None:
    payload = {
        "results": [
            {"path": "memory/a.md", "startLine": 3, "endLine": 5, "citation": "x#L1-L1"},
            {"citation": "memory/b c.md#L7-L9"},
            {"citation": "MEMORY.md#L4"},
        ]
    }
    assert scale.cli_ranked(payload) == [
        ["memory/a.md", 3, 5], ["memory/b c.md", 7, 9], ["MEMORY.md", 4, 4]
    ]  # fmt: skip
    assert scale.cli_ranked({"results": []}) == []
    for bad in ({"error": "boom"}, [], {"results": [{"snippet": "no position"}]}):
        with pytest.raises(ValueError):
            scale.cli_ranked(bad)


def test_codes_must_name_a_checkout(scale: ModuleType, tmp_path: Path) -> None:
    assert scale.parse_codes([]) == {"this": ROOT}
    assert scale.parse_codes([f"a={ROOT}", f"b={ROOT}"]) == {"a": ROOT, "b": ROOT}
    with pytest.raises(SystemExit, match="NAME=PATH"):
        scale.parse_codes([str(ROOT)])
    with pytest.raises(SystemExit, match="no memmw package"):
        scale.parse_codes([f"x={tmp_path}"])


@pytest.mark.slow
def test_two_checkouts_side_by_side_end_to_end(
    scale: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = [
        "synthetic", "--files", "4", "--queries", "6", "--fresh", "3", "--cli-queries", "2",
        "--fts5-queries", "2", "--code", f"a={ROOT}", "--code", f"b={ROOT}",
        "--out", str(tmp_path / "out"), "--python", sys.executable,
    ]  # fmt: skip
    assert scale.main(argv) == 0
    printed = capsys.readouterr().out
    assert "| a | b | b / a |" in printed
    report = json.loads((tmp_path / "out" / "scale.json").read_text(encoding="utf-8"))
    for name in ("a", "b"):
        got = report["results"][name]
        assert report["checkouts"][name]["memmw_file"] == str(ROOT / "memmw" / "__init__.py")
        assert got["chunks"] > 4
        assert got["cli_codes"] == [0, 0]
        # The same code over the same index ranks the same everywhere.
        assert got["cli_identical"] == 2 and got["same_as_first_column"] == 6
        assert got["incr_files_changed"] == 1
    # The generated workspace and the indexes are removed without --keep.
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["scale.json"]
