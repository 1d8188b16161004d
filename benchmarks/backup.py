"""Backup and restore of a generated workspace: sizes, times and embedding calls.

Usage::

    python benchmarks/backup.py [--notes 2000] [--dims 256] [--queries 20]

Generates ``--notes`` small daily notes (seeded) in a temporary folder, indexes them with
the deterministic ``fake`` provider (wrapped to count its calls), writes a backup, restores
it into a new workspace and state folder, and runs the same hybrid searches on both.
Prints the workspace and archive sizes, the backup and restore wall times, the document
embedding calls and texts of the first index and of the restore (plus the restored copy's
first searches), and whether every search returned the same hits (path, lines, score,
snippet). Wall times on a shared machine vary; the call counts do not.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from memmw import Memory, MemoryConfig  # noqa: E402
from memmw.embeddings.registry import register_provider, unregister_provider  # noqa: E402
from memmw.testing import FakeEmbeddingProvider  # noqa: E402

SEED = 11
WORDS = (
    "peanut tea garden budget hike tax Berlin piano dog sister rollout deploy invoice doctor "
    "flight recipe birthday lease bike router"
).split()


def generate(ws: Path, notes: int, rng: random.Random) -> None:
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text("# Memory\n\n- Allergic to peanuts.\n", encoding="utf-8")
    for i in range(notes):
        day = f"20{20 + i // 336:02d}-{i // 28 % 12 + 1:02d}-{i % 28 + 1:02d}"
        lines = [" ".join(rng.choices(WORDS, k=rng.randint(5, 14))) + "." for _ in range(3)]
        (ws / "memory" / f"{day}-n{i}.md").write_text(
            f"# Note {i}\n\n" + "\n".join(lines) + "\n", encoding="utf-8"
        )


def size_of(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def searches(mem: Memory, queries: list[str]) -> list[object]:
    out = []
    for q in queries:
        r = mem.search_result(q, max_results=6)
        out.append((r.mode, [(h.path, h.start_line, h.end_line, h.score, h.snippet) for h in r.hits]))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--notes", type=int, default=2000)
    ap.add_argument("--dims", type=int, default=256)
    ap.add_argument("--queries", type=int, default=20)
    args = ap.parse_args()
    rng = random.Random(SEED)
    queries = [" ".join(rng.choices(WORDS, k=rng.randint(1, 3))) for _ in range(args.queries)]
    provider = FakeEmbeddingProvider(dims=args.dims)
    register_provider("counting", lambda config: provider, replace=True)
    config = MemoryConfig(provider="counting")
    try:
        with tempfile.TemporaryDirectory() as tmp_name:
            tmp = Path(tmp_name)
            ws = tmp / "ws"
            generate(ws, args.notes, rng)
            with Memory(workspace=ws, state_dir=tmp / "st1", config=config) as mem:
                t = time.perf_counter()
                mem.sync()
                index_s = time.perf_counter() - t
                first_calls, first_texts = provider.document_calls, provider.texts_embedded
                t = time.perf_counter()
                report = mem.backup(tmp / "backup.tar.gz")
                backup_s = time.perf_counter() - t
                original = searches(mem, queries)
            provider.document_calls = provider.texts_embedded = provider.query_calls = 0
            t = time.perf_counter()
            restored = Memory.restore(tmp / "backup.tar.gz", tmp / "copy", tmp / "st2", config=config)
            restore_s = time.perf_counter() - t
            with Memory(workspace=tmp / "copy", state_dir=tmp / "st2", config=config) as mem:
                copy = searches(mem, queries)
            print(f"notes: {args.notes} (+ MEMORY.md), dims: {args.dims}, queries: {args.queries}")
            print(f"workspace: {size_of(ws)} bytes in {report.files} files")
            print(f"first index: {index_s:.2f} s, {first_calls} document calls, {first_texts} texts")
            print(
                f"backup: {backup_s:.2f} s -> {report.size} bytes, {report.vectors} vectors,"
                f" {report.missing_vectors} missing"
            )
            print(
                f"restore (verify, write, import, index): {restore_s:.2f} s, "
                f"{restored.vectors_imported} vectors imported, {restored.from_cache} from cache, "
                f"{restored.embedded} embedded"
            )
            print(
                f"document embedding calls after the backup (restore + {len(queries)} searches): "
                f"{provider.document_calls} calls, "
                f"{provider.texts_embedded - provider.query_calls} texts "
                f"(query embeddings: {provider.query_calls})"
            )
            print(f"identical search results: {copy == original}")
            modes = sorted({m for m, _ in copy})  # type: ignore[misc]
            print(f"search modes: {modes}")
    finally:
        unregister_provider("counting")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
