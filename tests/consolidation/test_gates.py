"""The gates as invariants: generated proposals (good, lossy, forged), run end to end.

Whatever a model proposes, a write that happens keeps every prior entry (at its line,
unchanged, or struck through with its text kept and a cited reason) and every citation
in what it added resolves to a non-blank line; a refused run leaves every byte as it was.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from memmw.consolidation.entries import citations_in, entry_body, is_entry, is_retracted
from memmw.consolidation.gates import GATES, GateInput, gate_keep
from memmw.consolidation.proposal import apply_edits, parse_proposal
from memmw.consolidation.run import consolidate
from memmw.text.lines import split_lines

from .conftest import DAILY, GROUP, make_memory, record_recalls, snapshot

ENTRIES = [
    "Deploy target: staging",
    "Editor: vim",
    "Team lead: Alice",
    "Standup at 09:30",
    "Prefers tea over coffee",
    "Deploy target: staging",  # a duplicate, for merges
]
GOOD_SOURCES = ["memory/2026-11-28.md#L2", "memory/2026-11-28.md#L4"]
BAD_SOURCES = [
    "memory/2026-11-28.md#L1",  # a heading
    "memory/2026-11-28.md#L77",  # past the end
    "memory/2026-11-27.md#L1",  # no such note
    "memory/groups/team/2026-11-28.md#L2",  # group-written
    "../secrets.md#L1",  # outside
]


@st.composite
def memory_files(draw: Any) -> str:
    n = draw(st.integers(1, 6))
    lines = ["# Memory", ""]
    for i in range(n):
        text = draw(st.sampled_from(ENTRIES))
        if draw(st.integers(0, 9)) == 0:
            lines.append(f"- ~~{text}~~ (retracted 2026-01-0{i + 1}: old)")
        else:
            lines.append(f"- {text}")
    return "\n".join(lines) + "\n"


@st.composite
def sources(draw: Any) -> list[Any]:
    pool = st.sampled_from(GOOD_SOURCES * 6 + BAD_SOURCES)  # mostly real, sometimes forged
    picked = draw(st.lists(pool, min_size=draw(st.sampled_from([1, 1, 1, 0])), max_size=2))
    out: list[Any] = []
    for s in picked:
        if draw(st.booleans()):
            path, _, line = s.partition("#L")
            quote = draw(
                st.sampled_from(["deploy target is now production"] * 3 + ["tuesday", "moon"])
            )
            out.append({"path": path, "line": int(line), "quote": quote})
        else:
            out.append(s)
    return out


@st.composite
def edits(draw: Any, prior: str) -> list[dict[str, Any]]:
    n_lines = len(split_lines(prior))
    # Mostly the entries' lines (3..n), sometimes a heading or a line past the end.
    line = st.one_of(st.integers(3, n_lines), st.integers(3, n_lines), st.integers(1, n_lines + 2))
    out: list[dict[str, Any]] = []
    ops = ["add", "update", "supersede", "merge"] * 3 + ["edit", "remove", "rewrite"]
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(ops))
        text = draw(
            st.sampled_from(["Deploy target: production", "Reviews on Tuesdays"] * 4 + ["x" * 5000])
        )
        edit: dict[str, Any] = {"op": op, "file": "MEMORY.md", "sources": draw(sources())}
        if op in ("add", "update", "edit"):
            edit["text"] = text
        if op in ("update", "supersede", "edit", "remove"):
            edit["line"] = draw(line)
        if op == "supersede":
            edit["reason"] = "no longer true"
        if op == "merge":
            edit["lines"] = draw(st.lists(line, min_size=2, max_size=3))
        if op == "rewrite":
            kept = split_lines(prior)
            drop = draw(st.integers(0, len(kept)))
            edit["text"] = "\n".join(kept[:drop] + kept[drop + 1 :]) + "\n- added\n"
        out.append(edit)
    return out


def _resolves(ws: Path, written: dict[str, list[str]], cite: Any) -> bool:
    lines = written.get(cite.path)
    if lines is None:
        path = ws / cite.path
        if cite.path.startswith("../") or not path.is_file():
            return False
        lines = split_lines(path.read_text(encoding="utf-8"))
    return 1 <= cite.start <= cite.end <= len(lines) and any(
        x.strip() for x in lines[cite.start - 1 : cite.end]
    )


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_any_write_that_passes_keeps_every_unsuperseded_entry_and_every_citation_resolves(
    data: st.DataObject,
) -> None:
    prior = data.draw(memory_files())
    proposal = data.draw(edits(prior))
    fraction = data.draw(st.sampled_from([0.0, 0.5, 1.0]))
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        os.environ["XDG_STATE_HOME"] = str(tmp_path / "xdg")
        ws = tmp_path / "ws"
        (ws / "memory" / "groups" / "team").mkdir(parents=True)
        (ws / "MEMORY.md").write_text(prior, encoding="utf-8")
        (ws / "memory" / "2026-11-28.md").write_text(DAILY, encoding="utf-8")
        (ws / "memory" / "groups" / "team" / "2026-11-28.md").write_text(GROUP, encoding="utf-8")
        mem = make_memory(ws, tmp_path, max_change_fraction=fraction)
        try:
            record_recalls(mem, "memory/2026-11-28.md", 2, ["a", "b", "c"])
            before = snapshot(ws)
            report = consolidate(
                mem, lambda messages: json.dumps({"edits": proposal}), sync=False
            )
        finally:
            mem.close()
        event(f"{report.status} {report.gate or ''}")
        if not report.applied:
            assert report.gate in ("proposal", *GATES) or report.status == "nothing", report
            assert snapshot(ws) == before
            return
        old = split_lines(prior)
        new = split_lines((ws / "MEMORY.md").read_text(encoding="utf-8"))
        assert len(new) >= len(old)
        live = [i for i, x in enumerate(old) if is_entry(x) and not is_retracted(x)]
        struck = 0
        for i, line in enumerate(old):
            if new[i] == line:
                continue
            assert i in live, (prior, new)
            # Struck through whole (retracted), or updated in place: a newer value first,
            # the old text kept on the line, struck through and dated.
            struck_here = new[i].startswith("- ~~" + entry_body(line) + "~~ (retracted ")
            kept_here = new[i].startswith("- ") and f" ~~{entry_body(line)}~~ (superseded " in new[i]
            assert struck_here or kept_here, (line, new[i])
            assert citations_in(new[i]), new[i]
            struck += 1
        assert struck <= max(1, int(fraction * len(live)))
        written = {"MEMORY.md": new}
        for line in new[len(old) :] + [n for n, o in zip(new, old, strict=False) if n != o]:
            cites = citations_in(line)
            assert cites, line
            for cite in cites:
                assert _resolves(ws, written, cite), (cite, line)
                assert not cite.path.startswith("memory/groups/"), line


@settings(max_examples=150, deadline=None)
@given(prior=memory_files(), data=st.data())
def test_the_keep_gate_passes_only_lines_kept_or_struck_with_their_text(
    prior: str, data: st.DataObject
) -> None:
    """Pure and fast: the keep gate alone over many generated proposals."""
    proposal = data.draw(edits(prior))
    try:
        parsed = parse_proposal(json.dumps({"edits": proposal}), ["MEMORY.md"])
        proposed = apply_edits({"MEMORY.md": prior}, parsed, day="2026-12-01")
    except ValueError:
        return
    verdict = gate_keep(
        GateInput(
            workspace=Path("/nonexistent"),
            proposed=proposed,
            start_sha={},
            budgets={},
            max_change_fraction=1.0,
        )
    )
    if not verdict.passed or "MEMORY.md" not in proposed:
        return
    old, new = split_lines(prior), proposed["MEMORY.md"].lines
    for i, line in enumerate(old):
        assert new[i] == line or (
            re.match(r"^- ~~.+~~ \(retracted \d{4}-\d{2}-\d{2}: .+\)$", new[i])
            and entry_body(line) in new[i]
        ) or (
            f" ~~{entry_body(line)}~~ (superseded 2026-12-01)" in new[i]
            and citations_in(new[i].split(" ~~", 1)[0])
        )
