"""The pre-images of each applied consolidation, kept in the state folder for ``--undo``.

``<state_dir>/consolidation/runs/<run id>/``: ``run.json`` (each target's path, whether
it existed, the sha256 of its bytes before and after) and ``pre/<n>`` (its bytes
before). A run directory is complete before the first target is written; the after
hashes are filled in once every write is done.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import secrets
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FOLDER = "consolidation"
#: Runs whose pre-images are kept (the oldest go first); ``--undo`` reverts the newest.
KEEP_RUNS = 50


def runs_dir(state_dir: Path) -> Path:
    """``<state_dir>/consolidation/runs``."""
    return Path(state_dir) / FOLDER / "runs"


def _write_bytes(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@dataclass
class RunRecord:
    """One applied run: where its pre-images are and what each target looked like."""

    folder: Path
    data: dict[str, Any]

    @property
    def run_id(self) -> str:
        """The run's id (its folder name)."""
        return self.folder.name

    def save(self) -> None:
        """Write ``run.json`` atomically."""
        _write_bytes(self.folder / "run.json", json.dumps(self.data, indent=2).encode())

    def pre_image(self, index: int) -> bytes | None:
        """The bytes of target ``index`` before the run (None: it did not exist)."""
        target = self.data["targets"][index]
        if not target["existed"]:
            return None
        data = (self.folder / "pre" / str(index)).read_bytes()
        if hashlib.sha256(data).hexdigest() != target["pre_sha"]:
            raise OSError(f"the kept pre-image of {target['path']} is damaged")
        return data


def begin(state_dir: Path, images: dict[str, bytes | None]) -> RunRecord:
    """Keep the pre-images of ``images`` (target -> bytes, None when missing) durably."""
    run_id = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)
    folder = runs_dir(state_dir) / run_id
    targets = []
    for i, (path, data) in enumerate(images.items()):
        if data is not None:
            _write_bytes(folder / "pre" / str(i), data)
        targets.append(
            {
                "path": path,
                "existed": data is not None,
                "pre_sha": hashlib.sha256(data or b"").hexdigest(),
                "post_sha": None,
            }
        )
    record = RunRecord(
        folder, {"id": run_id, "started": time.time(), "targets": targets, "state": "writing"}
    )
    record.save()
    for old in runs(state_dir)[KEEP_RUNS:]:
        shutil.rmtree(old.folder, ignore_errors=True)
    return record


def runs(state_dir: Path) -> list[RunRecord]:
    """Every kept run, newest first (unreadable ones skipped)."""
    root = runs_dir(state_dir)
    out = []
    try:
        names = sorted(os.listdir(root), reverse=True)
    except OSError:
        return []
    for name in names:
        try:
            data = json.loads((root / name / "run.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("targets"), list):
            out.append(RunRecord(root / name, data))
    return out
