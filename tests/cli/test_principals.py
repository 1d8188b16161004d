"""``memmw principals list|delete``, ``memmw status --principals``, ``memmw stats --principal``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memmw.cli.common import EXIT_OK, EXIT_USAGE
from tests.cli.test_cli import make_workspace, run, run_json

from ..conftest import make_memory


def with_people(root: Path) -> Path:
    ws = make_workspace(root)
    alice = ws / "memory" / "principals" / "alice"
    alice.mkdir(parents=True)
    (alice / "USER.md").write_text("- pin: ALICEPIN\n", encoding="utf-8")
    (alice / "2026-03-10.md").write_text("## Quinn Ode\n- city: ALICECITY\n", encoding="utf-8")
    bob = ws / "memory" / "principals" / "bob"
    bob.mkdir(parents=True)
    (bob / "USER.md").write_text("- pin: BOBPIN\n", encoding="utf-8")
    return ws


def test_list_status_and_delete_one_principal(capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    ws = with_people(tmp_path / "ws")
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    code, data = run_json(capsys, "principals", "list", "-w", str(ws))
    rows = {r["principal"]: r for r in data["principals"]}  # type: ignore[index,union-attr]
    assert code == EXIT_OK and set(rows) == {"alice", "bob"}
    assert rows["alice"]["files"] == 2 and rows["alice"]["indexedFiles"] == 2
    assert rows["alice"]["facts"] == 1 and rows["bob"]["facts"] == 0
    code, out, _ = run(capsys, "status", "--principals", "-w", str(ws))
    assert "alice: 2 files, 2 indexed" in out and "bob: 1 files" in out
    code, out, _ = run(capsys, "status", "-w", str(ws))
    assert "Principal" not in out  # the default status is unchanged
    code, out, err = run(capsys, "principals", "delete", "alice", "-w", str(ws))
    assert code == EXIT_OK and "would remove: memory/principals/alice/USER.md" in out and "--yes" in err
    assert (ws / "memory" / "principals" / "alice" / "USER.md").exists()
    code, data = run_json(capsys, "principals", "delete", "alice", "--yes", "-w", str(ws))
    assert code == EXIT_OK and data["remaining"] == 0 and len(data["files"]) == 2  # type: ignore[index,arg-type]
    assert not (ws / "memory" / "principals" / "alice").exists()
    code, found = run_json(capsys, "search", "ALICECITY ALICEPIN", "-w", str(ws))
    assert "ALICE" not in json.dumps(found)
    code, data = run_json(capsys, "principals", "list", "-w", str(ws))
    assert [r["principal"] for r in data["principals"]] == ["bob"]  # type: ignore[index,union-attr]
    assert (ws / "MEMORY.md").exists()


@pytest.mark.parametrize("bad", ["../x", "a/b", "al ice", ".."])
def test_bad_principal_ids_are_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            bad: str) -> None:
    ws = with_people(tmp_path / "ws")
    code, _, err = run(capsys, "principals", "delete", bad, "--yes", "-w", str(ws))
    assert code == EXIT_USAGE and "principal must be" in err
    assert (ws / "memory" / "principals" / "alice" / "USER.md").exists()
    code, _, err = run(capsys, "stats", "--principal", bad, "-w", str(ws))
    assert code == EXIT_USAGE and "principal must be" in err


def test_stats_per_principal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from memmw import MemoryConfig
    from memmw.config import ActiveMemoryConfig
    from memmw.hooks.active_memory import ActiveMemory

    ws = with_people(tmp_path / "ws")
    state = tmp_path / "state"
    config = MemoryConfig(provider="none", active_memory=ActiveMemoryConfig(deadline_ms=60_000))
    with make_memory(workspace=ws, state_dir=state, config=config) as mem:
        mem.sync()
        am = ActiveMemory(mem)
        am.build("Where does Quinn Ode live?", session_key="main", principal="alice")
        am.build("Where does Quinn Ode live?", session_key="main", principal="bob")
        am.build("Where does Quinn Ode live?", session_key="main")
    code, data = run_json(capsys, "stats", "--principal", "alice", "-w", str(ws),
                          "--state-dir", str(state))
    assert code == EXIT_OK and data["injection"]["turns"] == 1, data  # type: ignore[index]
    assert data["injection"]["injectedTurns"] == 1  # type: ignore[index]
    code, data = run_json(capsys, "stats", "--principal", "owner", "-w", str(ws),
                          "--state-dir", str(state))
    assert data["injection"]["turns"] == 1  # type: ignore[index]
    code, data = run_json(capsys, "stats", "-w", str(ws), "--state-dir", str(state))
    assert data["injection"]["turns"] == 3  # type: ignore[index]


def test_mcp_refuses_a_bad_principal(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ws = with_people(tmp_path / "ws")
    code, _, err = run(capsys, "mcp", "--principal", "../alice", "-w", str(ws))
    assert code == EXIT_USAGE and "principal must be" in err
