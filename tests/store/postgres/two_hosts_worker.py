"""One "host" of the two-host test: its own workspace, the shared DSN (run as a process)."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from memmw.errors import IndexBusyError
from memmw.store.postgres.backend import PostgresStore
from memmw.store.terms import term_hash
from memmw.text.analysis import query_terms
from memmw.text.chunking import chunk_text


def index(store: PostgresStore, folder: Path, *, pause: float = 0.0, rebuild: bool = True) -> int:
    """Index every Markdown file under ``folder`` into ``store`` (a full rebuild)."""
    files = sorted(folder.rglob("*.md"))
    with store.write(what=f"sync {store.agent_id}") as w, store.rebuild(w) as staged:
        for path in files:
            text = path.read_text(encoding="utf-8")
            staged.replace_file(
                path=str(path.relative_to(folder)), source="memory", file_hash=str(hash(text)),
                mtime=path.stat().st_mtime, size=len(text), decay_ts=None,
                chunks=chunk_text(text, tokens=40, overlap=0), model="fts-only",
            )
            time.sleep(pause)
        staged.bump_generation()
    return len(files)


def search(store: PostgresStore, query: str) -> list[dict[str, object]]:
    """Keyword hits of ``query`` labelled with the namespace they come from."""
    with store.read() as r:
        hits = r.bm25_search([term_hash(t) for t in query_terms(query)], 5, ["memory"])
        rows = r.chunks([h[0] for h in hits])
    return [{"namespace": store.agent_id, "path": rows[h[0]].path, "score": h[1]} for h in hits]


def wait_for(flag: Path, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not flag.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"no {flag.name}")
        time.sleep(0.05)


def host_a(dsn: str, workspace: Path, flags: Path) -> dict[str, object]:
    """Owns agent alice and the shared team folder; rebuilds alice slowly while B searches."""
    alice = PostgresStore(dsn, agent_id="alice")
    team = PostgresStore(dsn, agent_id="team")
    index(alice, workspace / "memory")
    index(team, workspace / "team")
    (flags / "a-indexed").touch()
    wait_for(flags / "b-indexed")
    # Hold the team writer lock and rebuild alice (with new notes) while B searches.
    (workspace / "memory" / "extra.md").write_text("Alice adopted a parrot named Kiwi.\n")
    with team.write(what="sync team"):
        (flags / "a-rebuilding").touch()
        files = index(alice, workspace / "memory", pause=0.3)
    (flags / "a-done").touch()
    alice.close()
    team.close()
    return {"pid": os.getpid(), "files": files}


def host_b(dsn: str, workspace: Path, flags: Path) -> dict[str, object]:
    """Agent bob: indexes its own notes, searches its own and the team namespace."""
    bob = PostgresStore(dsn, agent_id="bob")
    team = PostgresStore(dsn, agent_id="team")
    alice = PostgresStore(dsn, agent_id="alice")
    wait_for(flags / "a-indexed")
    index(bob, workspace / "memory")
    (flags / "b-indexed").touch()
    wait_for(flags / "a-rebuilding")
    busy = ""
    try:
        with team.write(timeout=0):
            pass
    except IndexBusyError as exc:
        busy = str(exc)
    searches = errors = 0
    alice_counts: set[int] = set()
    own: list[dict[str, object]] = []
    shared: list[dict[str, object]] = []
    while not (flags / "a-done").exists():
        try:
            own = search(bob, "bob boat harbour")
            shared = search(team, "project deadline launch")
            with alice.read() as r:
                alice_counts.add(r.chunk_count(["memory"]))
            searches += 1
        except Exception:
            errors += 1
        time.sleep(0.02)
    with alice.read() as r:
        after = r.chunk_count(["memory"])
    for store in (bob, team, alice):
        store.close()
    return {
        "busy": busy, "searches": searches, "errors": errors, "own": own, "shared": shared,
        "alice_counts_during": sorted(alice_counts), "alice_count_after": after,
    }


if __name__ == "__main__":
    role, dsn, workspace, flags, out = sys.argv[1:6]
    run = host_a if role == "a" else host_b
    result = run(dsn, Path(workspace), Path(flags))
    Path(out).write_text(json.dumps(result), encoding="utf-8")
