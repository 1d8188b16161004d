"""Two "hosts" (processes with their own workspaces) share one database through one DSN."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
WORKER = Path(__file__).with_name("two_hosts_worker.py")


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_shared_scope_writer_lock_and_a_rebuild_while_the_other_host_searches(
    pg_database: str, tmp_path: Path
) -> None:
    ws_a, ws_b, flags = tmp_path / "host-a", tmp_path / "host-b", tmp_path / "flags"
    flags.mkdir()
    _write(ws_a, {
        **{f"memory/2026-01-{d:02d}.md": f"Alice reviewed the gateway on day {d}.\n"
           for d in range(1, 11)},
        "team/project-launch.md": "Project launch deadline is March 3.\nOwner: the team.\n",
        "team/project-budget.md": "Budget review before the launch.\n",
    })
    _write(ws_b, {"memory/2026-01-05.md": "Bob repaired the boat in the harbour.\n"})
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, str(WORKER), role, pg_database, str(ws), str(flags),
             str(tmp_path / f"{role}.json")],
            env=env, stderr=subprocess.PIPE, text=True,
        )
        for role, ws in (("a", ws_a), ("b", ws_b))
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, err
    a = json.loads((tmp_path / "a.json").read_text())
    b = json.loads((tmp_path / "b.json").read_text())

    # The second writer of the team namespace is told who holds it.
    assert f"pid {a['pid']}" in b["busy"] and "sync team" in b["busy"]
    # Bob searched his own memory and the shared team folder, hits labelled by namespace,
    # all through A's rebuild, without an error.
    assert b["searches"] > 0 and b["errors"] == 0
    assert b["own"] and {h["namespace"] for h in b["own"]} == {"bob"}
    assert {h["namespace"] for h in b["shared"]} == {"team"}
    assert {h["path"] for h in b["shared"]} <= {"project-launch.md", "project-budget.md"}
    # While A rebuilt alice (one file every 0.3 s), B saw the complete old index, then the
    # complete new one once it committed: never an empty or partial one.
    assert 10 in b["alice_counts_during"]
    assert set(b["alice_counts_during"]) <= {10, 11}
    assert b["alice_count_after"] == 11 == a["files"]
