"""``memmw state list|prune``, ``memmw backup`` and ``memmw restore``."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from memmw.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from tests.cli.test_cli import make_workspace, run, run_json


def test_state_list_and_prune(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    live = make_workspace(tmp_path / "live")
    gone = make_workspace(tmp_path / "gone")
    for ws in (live, gone):
        assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    shutil.rmtree(gone)
    code, listed = run_json(capsys, "state", "list")
    assert code == EXIT_OK
    rows = {r["workspace"]: r for r in listed["folders"]}  # type: ignore[union-attr,index]
    assert rows[str(live.resolve())]["workspaceExists"] is True
    assert rows[str(gone.resolve())]["orphan"] is True
    assert rows[str(live.resolve())]["agents"] == ["main"]
    code, out, _ = run(capsys, "state", "list")
    assert "[workspace gone]" in out and str(live.resolve()) in out
    code, out, err = run(capsys, "state", "prune")
    assert code == EXIT_OK and "would remove" in out and "--yes" in err
    gone_state = Path(rows[str(gone.resolve())]["path"])  # type: ignore[arg-type]
    assert gone_state.is_dir()
    code, out, _ = run(capsys, "state", "prune", "--yes")
    assert code == EXIT_OK and f"removed: {gone_state}" in out
    assert not gone_state.exists()
    assert Path(rows[str(live.resolve())]["path"]).is_dir()  # type: ignore[arg-type]
    assert run(capsys, "state", "prune", "--yes")[1].strip() == "Nothing to prune."


def test_backup_then_restore(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    archive = tmp_path / "b.tar.gz"
    code, data = run_json(capsys, "backup", str(archive), "-w", str(ws))
    assert code == EXIT_OK and data["files"] == 3 and archive.is_file()
    code, _, err = run(capsys, "restore", str(archive))
    assert code == EXIT_USAGE and "--workspace" in err
    target = tmp_path / "copy"
    code, data = run_json(capsys, "restore", str(archive), "-w", str(target))
    assert code == EXIT_OK and data["files"] == 3
    assert (target / "MEMORY.md").read_bytes() == (ws / "MEMORY.md").read_bytes()
    code, _, err = run(capsys, "restore", str(archive), "-w", str(target))
    assert code == EXIT_ERROR and "not empty" in err
    assert run(capsys, "restore", str(archive), "-w", str(target), "--force")[0] == EXIT_OK
    archive.write_bytes(archive.read_bytes()[:-40])
    code, _, err = run(capsys, "restore", str(archive), "-w", str(tmp_path / "other"))
    assert code == EXIT_ERROR and "damaged" in err
    assert not (tmp_path / "other").exists()


@pytest.mark.parametrize(
    "args", [("backup",), ("restore",), ("state", "list"), ("state", "prune"), ("state",)]
)
def test_help_with_examples(capsys: pytest.CaptureFixture[str], args: tuple[str, ...]) -> None:
    code, out, _ = run(capsys, *args, "--help")
    assert code == EXIT_OK and "Example" in out
    if args != ("state",):
        assert "--workspace" in out and "--json" in out  # global options
