"""Where a deleted secret's bytes stay in PostgreSQL (issue 20): a note holding a unique
token is indexed, deleted and synced; the database's table files and the server's WAL
segments are grepped for the token after a CHECKPOINT, then after VACUUM and VACUUM FULL.

Usage (a local server whose data folder this user can read; superuser DSN)::

    python benchmarks/pg_deleted_bytes.py postgresql://postgres@127.0.0.1:5432/postgres /path/to/data
"""

from __future__ import annotations

import sys
import tempfile
import uuid
from pathlib import Path

import psycopg
from psycopg import sql
from psycopg.conninfo import make_conninfo

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memmw import Memory, MemoryConfig, StoreConfig  # noqa: E402

admin = sys.argv[1]
datadir = Path(sys.argv[2])
name = f"memmw_redact_{uuid.uuid4().hex[:8]}"
with psycopg.connect(admin, autocommit=True) as c:
    c.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
dsn = make_conninfo(admin, dbname=name)


def grep(secret: str) -> dict[str, int]:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("CHECKPOINT")
        oid = c.execute("SELECT oid FROM pg_database WHERE datname=%s", (name,)).fetchone()[0]
    b = secret.encode()
    base = sum(1 for p in (datadir / "base" / str(oid)).iterdir() if p.is_file() and b in p.read_bytes())
    wal = sum(1 for p in (datadir / "pg_wal").iterdir() if p.is_file() and b in p.read_bytes())
    return {"tableFiles": base, "walSegments": wal}


try:
    with psycopg.connect(dsn, autocommit=True) as c:
        c.execute("CREATE EXTENSION IF NOT EXISTS vector")
    secret = f"zq{uuid.uuid4().hex}zq"
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        note = ws / "memory" / "n.md"
        note.write_text(f"- the vault word is {secret}\n- lunch\n")
        (ws / "MEMORY.md").write_text("# Facts\n- port 8080\n")
        cfg = MemoryConfig(provider="none", store=StoreConfig(backend="postgres", dsn=dsn))
        with Memory(ws, Path(tmp) / "state", config=cfg) as mem:
            mem.sync()
            print("indexed:", grep(secret))
            note.unlink()
            mem.sync()
            print("after delete+sync:", grep(secret))
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("VACUUM")
        print("after VACUUM:", grep(secret))
        with psycopg.connect(dsn, autocommit=True) as c:
            c.execute("VACUUM FULL")
        print("after VACUUM FULL:", grep(secret))
finally:
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
