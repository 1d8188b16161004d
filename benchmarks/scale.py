"""Scale benchmark: index and keyword search at ~165k chunks, one or more checkouts side by side.

Usage::

    python benchmarks/scale.py ../shared/benchmarks/locomo-dev --files 5000 \
        --code before=/tmp/bench-before --code after=. --out /tmp/memmw-scale

The workspace holds ``--files`` dated daily notes (``memory/YYYY-MM-DD.md``, one per day)
filled with LoCoMo dialogue turns: runs of 4-16 consecutive turns of a session, the
sessions drawn at random (seeded) across the conversations, under a ``## HH:MM`` heading,
about ``--file-chars`` characters a note (35,000 gives ~33 chunks a note, ~165k chunks
for 5,000 notes). The notes are written to ``--out`` at run time, never into the
repository (the LoCoMo licence is non-commercial). The queries are a seeded sample of
the LoCoMo questions. ``synthetic`` instead of the data folder writes notes from a
seeded vocabulary (about 4 chunks a note, plus ``MEMORY.md``) and synthetic queries.

Every measurement runs in a child process with ``PYTHONPATH=<checkout>`` and uses only
the public API (``memmw.Memory``, ``MemoryConfig``, ``StoreConfig``, ``sync``,
``search``, ``close``; ``prepare`` when the checkout has it) and the CLI
(``python -m memmw --workspace W --state-dir S --config keyword-only.toml search --json
Q``), keyword-only (``provider = "none"``). The checkouts alternate at every step, so a
slower machine hits each the same:

1. full index: ``Memory.sync(force=True)`` on a fresh state folder (median of
   ``--repeats``), the index process's max RSS, and the index on disk (database + WAL,
   and the whole state folder);
2. a fresh process (no ``prepare()``, no warm-up): import + open time, then the first
   ``--fresh`` searches (p50 / p95 / max); then ``prepare()`` when the checkout has it;
   then ``--queries`` searches warm (p50 / p95); the process's max RSS;
3. the one-shot CLI: ``memmw search --json`` for each of the first ``--cli-queries``
   queries (wall time and max RSS, median and max) and whether it ranks as the library
   does: the CLI's list of (path, start line, end line) equals the warm library's (step
   2) for k of them, and the top hit for k of them;
4. in a process that has called ``prepare()``: a no-op ``sync()``, a ``sync()`` after one
   note got a line more, and the first search after it (the note is then restored);
5. ``StoreConfig(keyword_backend="fts5")`` in a fresh process: its first ``sync()`` (a
   rebuild when the checkout's index identity includes the backend), first search,
   p50 / p95. Last, since it may leave an index built for FTS5 only.

It prints a markdown table (one column per checkout, and each column's ratio to the
first) and writes every raw figure to ``<out>/scale.json`` (or ``--json``), with the
load average seen as each child started (the machine's noise). At 165k chunks step 1
takes minutes per checkout; ``--files 200`` (~6,600 chunks) runs in a few minutes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEED = 20260101
ROOT = Path(__file__).resolve().parents[1]

# -- workspace: LoCoMo turns -------------------------------------------------------------

#: Characters of turns per daily note; ~33 chunks with the 400-token chunker.
FILE_CHARS = 35_000


def load_sessions(data: Path) -> list[list[str]]:
    """The turn lines (``- [D3:7] Speaker: text``) of every LoCoMo session, in file order."""
    sessions = []
    for f in sorted((data / "workspaces").glob("*/memory/*.md")):
        turns = [
            line for line in f.read_text(encoding="utf-8").split("\n") if line.startswith("- [D")
        ]
        if turns:
            sessions.append(turns)
    if not sessions:
        raise SystemExit(f"no LoCoMo turns under {data / 'workspaces'}")
    return sessions


def locomo_note(rnd: random.Random, sessions: list[list[str]], day: dt.date, chars: int) -> str:
    """One daily note: runs of consecutive turns from random sessions, ~``chars`` long."""
    lines = [f"# {day.isoformat()}"]
    size = 0
    minute = rnd.randint(6 * 60, 9 * 60)
    while size < chars:
        turns = rnd.choice(sessions)
        start = rnd.randrange(len(turns))
        block = turns[start : start + rnd.randint(4, 16)]
        lines += ["", f"## {minute // 60 % 24:02d}:{minute % 60:02d}", *block]
        size += sum(len(t) + 1 for t in block)
        minute += rnd.randint(1, 12)
    return "\n".join(lines) + "\n"


def generate_locomo(root: Path, data: Path, files: int, chars: int, seed: int) -> None:
    """Write ``files`` daily notes of LoCoMo turns (sizes vary from 0.5x to 1.5x ``chars``)."""
    rnd = random.Random(seed)
    sessions = load_sessions(data)
    memory_dir = root / "memory"
    memory_dir.mkdir(parents=True)
    start = dt.date(2026, 6, 30) - dt.timedelta(days=files - 1)
    for i in range(files):
        day = start + dt.timedelta(days=i)
        size = round(chars * rnd.uniform(0.5, 1.5))
        (memory_dir / f"{day.isoformat()}.md").write_text(
            locomo_note(rnd, sessions, day, size), encoding="utf-8"
        )


def locomo_queries(data: Path, n: int, seed: int) -> list[str]:
    """A seeded sample of ``n`` LoCoMo questions (distinct while there are enough)."""
    questions = [
        json.loads(line)["query"]
        for line in (data / "queries.jsonl").read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    rnd = random.Random(seed)
    if n <= len(questions):
        return rnd.sample(questions, n)
    return [rnd.choice(questions) for _ in range(n)]


# -- workspace: synthetic vocabulary ---------------------------------------------------

#: One chunk holds ~1600 weighted chars; a synthetic note of ~4 chunks is ~6 KB.
CHUNKS_PER_FILE = 4

SUBJECTS = (
    "Alice Bob Carol Dana Erik Fatima Grace Hiro Ines Jonas Kenji Lena Mateo Nadia Omar "
    "Priya Quinn Rosa Sven Tariq Uma Viktor Wen Yara Zoe"
).split()
TOPICS = (
    "kubernetes migration, gateway outage, backup rotation, quarterly budget, invoice dispute, "
    "dentist appointment, flight to Lisbon, hotel in Kyoto, birthday party, piano lessons, "
    "garden irrigation, tomato seedlings, database upgrade, security audit, VPN certificate, "
    "marathon training, sourdough starter, car insurance, tax return, apartment lease, "
    "conference talk, hiring pipeline, onboarding checklist, release notes, API rate limits, "
    "search relevance, embedding cache, sprint retro, design review, customer escalation, "
    "wedding planning, school pickup, veterinarian visit, solar panels, heat pump quote, "
    "grocery list, book club, chess tournament, photography workshop, camping trip"
).split(", ")
VERBS = (
    "discussed reviewed postponed approved rejected scheduled fixed broke migrated "
    "documented planned cancelled booked renewed tested measured reported escalated"
).split()
DETAILS = (
    "because the previous attempt failed on Tuesday",
    "after a long call with the vendor",
    "pending confirmation from finance",
    "with a follow-up next week",
    "and the numbers looked better than expected",
    "although nobody wrote down the final decision",
    "so the reminder moves to Friday morning",
    "while the staging cluster was still down",
    "using the checklist from last quarter",
    "which should save about two hours per week",
)
FILLER = (
    "the a of to and in on for with at by from about into over after before under "
    "again quickly carefully finally also maybe probably definitely"
).split()


def sentence(rnd: random.Random) -> str:
    words = [
        rnd.choice(SUBJECTS),
        rnd.choice(VERBS),
        "the",
        rnd.choice(TOPICS),
        rnd.choice(DETAILS),
    ]
    words += rnd.choices(FILLER, k=rnd.randint(2, 6))
    words.append(f"ref-{rnd.randint(1000, 99999)}")
    return " ".join(words) + "."


def synthetic_note(rnd: random.Random, day: dt.date, target_chars: int) -> str:
    lines = [f"# {day.isoformat()}", ""]
    size = 0
    while size < target_chars:
        if rnd.random() < 0.12:
            lines += ["", f"## {rnd.choice(TOPICS).title()}"]
        line = "- " + " ".join(sentence(rnd) for _ in range(rnd.randint(1, 3)))
        lines.append(line)
        size += len(line) + 1
    return "\n".join(lines) + "\n"


def generate_synthetic(root: Path, files: int, seed: int) -> None:
    """``files`` synthetic daily notes of ~4 chunks each, plus a 40-entry ``MEMORY.md``."""
    rnd = random.Random(seed)
    memory_dir = root / "memory"
    memory_dir.mkdir(parents=True)
    start = dt.date(2026, 6, 30) - dt.timedelta(days=files - 1)
    # A chunk adds ~1000 chars of new text (1600 minus the overlap carried and the
    # partial line that does not fit).
    per_file = CHUNKS_PER_FILE * 990
    for i in range(files):
        day = start + dt.timedelta(days=i)
        (memory_dir / f"{day.isoformat()}.md").write_text(
            synthetic_note(rnd, day, per_file), encoding="utf-8"
        )
    entries = [f"- {sentence(rnd)}" for _ in range(40)]
    (root / "MEMORY.md").write_text("\n".join(entries) + "\n", encoding="utf-8")


def synthetic_queries(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    queries = []
    for _ in range(n):
        kind = rnd.random()
        if kind < 0.4:
            queries.append(rnd.choice(TOPICS))
        elif kind < 0.7:
            queries.append(
                f"when did {rnd.choice(SUBJECTS)} {rnd.choice(VERBS)} the {rnd.choice(TOPICS)}"
            )
        elif kind < 0.9:
            queries.append(f"{rnd.choice(TOPICS)} {rnd.choice(DETAILS).split()[-1]}")
        else:
            queries.append(f"ref-{rnd.randint(1000, 99999)}")
    return queries


# -- small helpers ---------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (``q`` in 0..1)."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q * (len(ordered) - 1))))
    return ordered[k]


def summary(ms: list[float]) -> dict[str, float]:
    return {
        "p50": statistics.median(ms),
        "p95": percentile(ms, 0.95),
        "max": max(ms),
        "n": len(ms),
    }


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


def database_bytes(state: Path) -> int:
    """Bytes of the SQLite databases in a state folder plus their WAL files."""
    total = 0
    for f in state.rglob("*"):
        if f.is_file() and (
            f.suffix in {".sqlite", ".sqlite3", ".db"} or f.name.endswith(("-wal",))
        ):
            total += f.stat().st_size
    return total


Ranked = list[list[Any]]


CITATION = re.compile(r"^(?P<path>.+)#L(?P<start>\d+)(?:-L(?P<end>\d+))?$")


def cli_ranked(payload: Any) -> Ranked:
    """``[[path, start_line, end_line], ...]`` of a ``search --json`` payload, best first.

    Reads ``path``/``startLine``/``endLine`` (or snake_case), else the ``path#Lx-Ly``
    citation, so a payload that changes shape is still compared line for line.

    Raises:
        ValueError: The payload has no ``results`` list or a result has no position.
    """
    rows = payload.get("results") if isinstance(payload, dict) else None
    if not isinstance(rows, list):
        raise ValueError("no results list")
    out: Ranked = []
    for r in rows:
        start = r.get("startLine", r.get("start_line"))
        end = r.get("endLine", r.get("end_line"))
        if r.get("path") is not None and start is not None and end is not None:
            out.append([r["path"], start, end])
            continue
        m = CITATION.match(str(r.get("citation", "")))
        if m is None:
            raise ValueError(f"a result without path and lines: {r!r}")
        start = int(m["start"])
        out.append([m["path"], start, int(m["end"] or start)])
    return out


# -- the worker: runs in a child process with PYTHONPATH=<checkout> ----------------------


def ranked(hits: Any) -> Ranked:
    """``[[path, start_line, end_line], ...]`` of library hits, best first."""
    return [[h.path, h.start_line, h.end_line] for h in hits]


def worker(spec_path: str) -> None:
    """Run one measurement task (``spec["task"]``) and print ``RESULT <json>``."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    started = time.perf_counter()
    import memmw

    import_s = time.perf_counter() - started
    task = spec["task"]
    ws, state = Path(spec["workspace"]), Path(spec["state"])
    cfg = memmw.MemoryConfig(provider="none")
    out: dict[str, Any] = {"memmw_file": memmw.__file__, "import_s": import_s}

    def timed_search(mem: Any, query: str) -> tuple[float, Ranked]:
        t = time.perf_counter()
        hits = mem.search(query)
        return (time.perf_counter() - t) * 1000, ranked(hits)

    if task == "index":
        with memmw.Memory(workspace=ws, state_dir=state, config=cfg) as mem:
            t = time.perf_counter()
            report = mem.sync(force=True)
            out["full_s"] = time.perf_counter() - t
        out["chunks"] = getattr(report, "chunks_total", None)
    elif task == "search":
        queries: list[str] = spec["queries"]
        fresh = spec["fresh"]
        t = time.perf_counter()
        mem = memmw.Memory(workspace=ws, state_dir=state, config=cfg)
        out["open_ms"] = (time.perf_counter() - t) * 1000
        first = [timed_search(mem, q) for q in queries[:fresh]]
        out["first_ms"] = [ms for ms, _ in first]
        out["first_ranked"] = [r for _, r in first]
        prepare = getattr(mem, "prepare", None)
        if callable(prepare):
            t = time.perf_counter()
            prepare()
            out["prepare_s"] = time.perf_counter() - t
        warm = [timed_search(mem, q) for q in queries]
        out["warm_ms"] = [ms for ms, _ in warm]
        out["warm_ranked"] = [r for _, r in warm]
        mem.close()
    elif task == "fts5":
        queries = spec["queries"]
        try:
            fts = memmw.MemoryConfig(
                provider="none", store=memmw.StoreConfig(keyword_backend="fts5")
            )
        except Exception as exc:  # the option may be gone in a checkout
            out["skipped"] = f"{type(exc).__name__}: {exc}"
        else:
            with memmw.Memory(workspace=ws, state_dir=state, config=fts) as mem:
                t = time.perf_counter()
                report = mem.sync()
                out["sync_s"] = time.perf_counter() - t
                out["full_rebuild"] = bool(getattr(report, "full_rebuild", False))
                lat = [timed_search(mem, q)[0] for q in queries]
            out["first_ms"], out["ms"] = lat[0], lat[1:]
    elif task == "incremental":
        target = Path(spec["target"])
        original = target.read_bytes()
        with memmw.Memory(workspace=ws, state_dir=state, config=cfg) as mem:
            prepare = getattr(mem, "prepare", None)
            if callable(prepare):
                prepare()
            mem.search(spec["query"])
            t = time.perf_counter()
            mem.sync()
            out["noop_sync_s"] = time.perf_counter() - t
            try:
                with target.open("a", encoding="utf-8") as fh:
                    fh.write("- [D0:0] Bench: the zeppelin hangar code changed today.\n")
                t = time.perf_counter()
                report = mem.sync()
                out["incr_sync_s"] = time.perf_counter() - t
                out["files_changed"] = getattr(report, "files_changed", None)
                out["after_sync_ms"] = timed_search(mem, spec["query"])[0]
            finally:
                target.write_bytes(original)
                mem.sync()
    else:
        raise SystemExit(f"unknown task {task!r}")
    out["maxrss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print("RESULT " + json.dumps(out), flush=True)


# -- the parent: children, interleaving, the table ------------------------------------


@dataclass
class Child:
    wall_s: float
    code: int
    stdout: str
    stderr: str
    maxrss_mb: float


#: The 1-minute load average as each child started (a shared machine's noise, reported).
LOADS: list[float] = []


def run_child(cmd: list[str], env: dict[str, str], cwd: Path, timeout: float) -> Child:
    """Run a command; wall time, exit code, output and the child's own max RSS (wait4)."""
    LOADS.append(os.getloadavg()[0])
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        proc = subprocess.Popen(
            cmd, env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=out, stderr=err
        )
        timer = threading.Timer(timeout, proc.kill)
        timer.start()
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        finally:
            timer.cancel()
        wall = time.perf_counter() - started
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return Child(
            wall,
            proc.returncode,
            out.read().decode("utf-8", "replace"),
            err.read().decode("utf-8", "replace"),
            usage.ru_maxrss / 1024,
        )


class Harness:
    """Runs the tasks of every checkout as child processes."""

    def __init__(self, args: argparse.Namespace, codes: dict[str, Path], out: Path) -> None:
        self.args = args
        self.codes = codes
        self.out = out
        self.python = args.python
        # -P (3.11+): the script's folder is not put first on sys.path, so only
        # PYTHONPATH decides which memmw is imported.
        self.flags = ["-P"] if sys.version_info >= (3, 11) else []
        (out / "keyword-only.toml").write_text('provider = "none"\n', encoding="utf-8")
        base = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
        base.pop("PYTHONPATH", None)
        base.update(
            XDG_STATE_HOME=str(out / "xdg-state"),
            XDG_CONFIG_HOME=str(out / "xdg-config"),
        )
        self.envs = {name: dict(base, PYTHONPATH=str(path)) for name, path in codes.items()}

    def state(self, name: str, repeat: int = 0) -> Path:
        return self.out / f"state-{name}" if repeat == 0 else self.out / f"state-{name}-{repeat}"

    def task(self, name: str, spec: dict[str, Any]) -> tuple[dict[str, Any], Child]:
        spec_path = self.out / f"spec-{name}-{spec['task']}.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        cmd = [self.python, *self.flags, str(Path(__file__).resolve()), "_worker", str(spec_path)]
        child = run_child(cmd, self.envs[name], self.out, self.args.timeout)
        result = next(
            (ln[7:] for ln in reversed(child.stdout.splitlines()) if ln.startswith("RESULT ")),
            None,
        )
        if child.code != 0 or result is None:
            raise SystemExit(
                f"{name}: task {spec['task']} failed (exit {child.code}):\n{child.stderr[-3000:]}"
            )
        return json.loads(result), child

    def cli(self, name: str, query: str, ws: Path) -> tuple[Ranked | None, Child]:
        cmd = [
            self.python, *self.flags, "-m", "memmw",
            "--workspace", str(ws), "--state-dir", str(self.state(name)),
            "--config", str(self.out / "keyword-only.toml"),
            "search", "--json", query,
        ]  # fmt: skip
        child = run_child(cmd, self.envs[name], self.out, self.args.timeout)
        try:
            return cli_ranked(json.loads(child.stdout)), child
        except ValueError:
            return None, child

    def probe(self, name: str) -> dict[str, Any]:
        """Which memmw a child imports, its version and the checkout's git commit."""
        code = "import memmw, json; print(json.dumps([memmw.__file__, memmw.__version__]))"
        child = run_child([self.python, *self.flags, "-c", code], self.envs[name], self.out, 120)
        if child.code != 0:
            raise SystemExit(f"{name}: cannot import memmw:\n{child.stderr[-2000:]}")
        file, version = json.loads(child.stdout)
        git = subprocess.run(
            ["git", "-C", str(self.codes[name]), "describe", "--always", "--dirty"],
            capture_output=True,
            text=True,
        )
        return {
            "path": str(self.codes[name]),
            "memmw_file": file,
            "version": version,
            "git": git.stdout.strip() or None,
        }


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def measure(args: argparse.Namespace, codes: dict[str, Path], out: Path) -> dict[str, Any]:
    names = list(codes)
    h = Harness(args, codes, out)
    checkouts = {name: h.probe(name) for name in names}
    for name, info in checkouts.items():
        log(f"{name}: {info['git']} imports {info['memmw_file']}")

    # The workspace (generated once; reused with --keep when the parameters match).
    ws = out / "ws"
    params = {
        "source": args.source,
        "files": args.files,
        "file_chars": args.file_chars,
        "seed": args.seed,
    }
    stamp = out / "ws.json"
    if not (ws.exists() and stamp.exists() and json.loads(stamp.read_text()) == params):
        shutil.rmtree(ws, ignore_errors=True)
        t = time.perf_counter()
        if args.source == "synthetic":
            generate_synthetic(ws, args.files, args.seed)
        else:
            generate_locomo(ws, Path(args.source), args.files, args.file_chars, args.seed)
        stamp.write_text(json.dumps(params), encoding="utf-8")
        log(f"workspace written in {time.perf_counter() - t:.1f} s")
    notes = sorted((ws / "memory").glob("*.md"))
    workspace = {
        **params,
        "notes": len(notes),
        "markdown_mb": folder_bytes(ws) / 1e6,
    }
    if args.source == "synthetic":
        queries = synthetic_queries(args.queries, args.seed + 1)
    else:
        queries = locomo_queries(Path(args.source), args.queries, args.seed + 1)
    fresh = min(args.fresh, len(queries))
    res: dict[str, dict[str, Any]] = {name: {} for name in names}

    # 1. Full index, the checkouts alternating; the first repeat's state serves the rest.
    for r in range(args.repeats):
        for name in names:
            state = h.state(name, r)
            shutil.rmtree(state, ignore_errors=True)
            got, child = h.task(name, {"task": "index", "workspace": str(ws), "state": str(state)})
            log(f"{name}: index {got['full_s']:.1f} s, {got['chunks']} chunks")
            m = res[name]
            m.setdefault("full_s_runs", []).append(got["full_s"])
            m["chunks"] = got["chunks"]
            if r == 0:
                m["index_rss_mb"] = child.maxrss_mb
                m["db_mb"] = database_bytes(state) / 1e6
                m["state_mb"] = folder_bytes(state) / 1e6
            else:
                shutil.rmtree(state, ignore_errors=True)
    for m in res.values():
        m["full_s"] = statistics.median(m["full_s_runs"])

    # 2. A fresh process: the first searches, prepare(), then warm searches.
    for r in range(args.search_repeats):
        for name in names:
            spec = {"task": "search", "workspace": str(ws), "state": str(h.state(name)),
                    "queries": queries, "fresh": fresh}  # fmt: skip
            got, child = h.task(name, spec)
            first, warm = summary(got["first_ms"]), summary(got["warm_ms"])
            log(f"{name}: first {fresh} p50 {first['p50']:.0f} ms, warm p50 {warm['p50']:.1f} ms")
            runs = res[name].setdefault("search_runs", [])
            runs.append({
                "import_s": got["import_s"],
                "open_ms": got["open_ms"],
                "first1_ms": got["first_ms"][0],
                "first_p50_ms": first["p50"],
                "first_p95_ms": first["p95"],
                "first_max_ms": first["max"],
                "prepare_s": got.get("prepare_s"),
                "warm_p50_ms": warm["p50"],
                "warm_p95_ms": warm["p95"],
                "search_rss_mb": child.maxrss_mb,
                "process_s": child.wall_s,
            })  # fmt: skip
            if r == 0:
                res[name]["first_ranked"] = got["first_ranked"]
                res[name]["warm_ranked"] = got["warm_ranked"]
    for m in res.values():
        for key in m["search_runs"][0]:
            values = [run[key] for run in m["search_runs"] if run[key] is not None]
            m[key] = statistics.median(values) if values else None
        m["fresh_eq_warm"] = sum(
            a == b for a, b in zip(m["first_ranked"], m["warm_ranked"][:fresh], strict=True)
        )
    base = names[0]
    for name in names:
        m = res[name]
        m["same_as_first_column"] = sum(
            a == b for a, b in zip(m["warm_ranked"], res[base]["warm_ranked"], strict=True)
        )

    # 3. The one-shot CLI on the first queries, the checkouts alternating per query.
    cli_n = min(args.cli_queries, len(queries))
    for name in names:
        res[name].update(cli_wall=[], cli_rss=[], cli_codes=[], cli_ranked=[])
    for i, query in enumerate(queries[:cli_n]):
        for name in names:
            rows, child = h.cli(name, query, ws)
            m = res[name]
            m["cli_wall"].append(child.wall_s)
            m["cli_rss"].append(child.maxrss_mb)
            m["cli_codes"].append(child.code)
            m["cli_ranked"].append(rows)
            if rows is None:
                log(f"{name}: CLI gave no JSON (exit {child.code}): {child.stderr[-500:]}")
        log(f"CLI query {i + 1}/{cli_n} done")
    for m in res.values():
        m["cli_s"] = statistics.median(m["cli_wall"])
        m["cli_max_s"] = max(m["cli_wall"])
        m["cli_rss_mb"] = statistics.median(m["cli_rss"])
        m["cli_rss_max_mb"] = max(m["cli_rss"])
        m["cli_identical"] = sum(
            c == w for c, w in zip(m["cli_ranked"], m["warm_ranked"][:cli_n], strict=True)
        )
        m["cli_same_top"] = sum(
            bool(c) and bool(w) and c[0] == w[0]
            for c, w in zip(m["cli_ranked"], m["warm_ranked"][:cli_n], strict=True)
        )

    # 4. Incremental sync after one note changed, in a prepared process.
    if not args.skip_incremental:
        target = notes[len(notes) // 2]
        for name in names:
            spec = {"task": "incremental", "workspace": str(ws), "state": str(h.state(name)),
                    "target": str(target), "query": queries[0]}  # fmt: skip
            got, _ = h.task(name, spec)
            res[name].update(
                noop_sync_s=got["noop_sync_s"],
                incr_sync_s=got["incr_sync_s"],
                incr_files_changed=got["files_changed"],
                after_sync_ms=got["after_sync_ms"],
            )
            log(f"{name}: incremental sync {got['incr_sync_s']:.2f} s")

    # 5. The FTS5 backend in a fresh process, last: a checkout whose index identity
    # includes the backend rebuilds the index here.
    if not args.skip_fts5:
        for name in names:
            spec = {"task": "fts5", "workspace": str(ws), "state": str(h.state(name)),
                    "queries": queries[: args.fts5_queries + 1]}  # fmt: skip
            got, _ = h.task(name, spec)
            m = res[name]
            if "skipped" in got:
                m["fts5_skipped"] = got["skipped"]
                continue
            s = summary(got["ms"])
            m.update(fts5_first_ms=got["first_ms"], fts5_p50_ms=s["p50"], fts5_p95_ms=s["p95"],
                     fts5_sync_s=got["sync_s"], fts5_rebuilt=got["full_rebuild"])  # fmt: skip
            log(f"{name}: fts5 p50 {s['p50']:.1f} ms")

    return {
        "workspace": workspace,
        "queries": {"n": len(queries), "fresh": fresh, "cli": cli_n, "seed": args.seed + 1},
        "python": sys.version.split()[0],
        "cpus": os.cpu_count(),
        "load_1min": {"min": min(LOADS), "median": statistics.median(LOADS), "max": max(LOADS)},
        "checkouts": checkouts,
        "results": res,
    }


#: (label, key, format); a key of ``(k, n)`` renders "k/n".
ROWS: list[tuple[str, str, str]] = [
    ("chunks", "chunks", "{:,.0f}"),
    ("full index, `sync(force=True)` (s)", "full_s", "{:.1f}"),
    ("index process max RSS (MB)", "index_rss_mb", "{:,.0f}"),
    ("index on disk: database + WAL (MB)", "db_mb", "{:,.0f}"),
    ("state folder total (MB)", "state_mb", "{:,.0f}"),
    ("fresh process: `import memmw` (s)", "import_s", "{:.2f}"),
    ("fresh process: `Memory(...)` (ms)", "open_ms", "{:.1f}"),
    ("fresh process: 1st search (ms)", "first1_ms", "{:,.1f}"),
    ("fresh process: first {fresh} searches p50 (ms)", "first_p50_ms", "{:,.1f}"),
    ("fresh process: first {fresh} searches p95 (ms)", "first_p95_ms", "{:,.1f}"),
    ("fresh process: first {fresh} searches max (ms)", "first_max_ms", "{:,.1f}"),
    ("fresh top-6 = warm top-6", "fresh_eq_warm", "/{fresh}"),
    ("`prepare()` (s)", "prepare_s", "{:.2f}"),
    ("warm: {n} searches p50 (ms)", "warm_p50_ms", "{:.2f}"),
    ("warm: {n} searches p95 (ms)", "warm_p95_ms", "{:.2f}"),
    ("search process max RSS (MB)", "search_rss_mb", "{:,.0f}"),
    ("one-shot CLI `search --json`: median (s)", "cli_s", "{:.2f}"),
    ("one-shot CLI `search --json`: max (s)", "cli_max_s", "{:.2f}"),
    ("one-shot CLI max RSS: median (MB)", "cli_rss_mb", "{:,.0f}"),
    ("one-shot CLI max RSS: max (MB)", "cli_rss_max_mb", "{:,.0f}"),
    ("CLI = library: identical top-6 lists", "cli_identical", "/{cli}"),
    ("CLI = library: same top hit", "cli_same_top", "/{cli}"),
    ("warm top-6 = first column's", "same_as_first_column", "/{n}"),
    ("no-op `sync()` (s)", "noop_sync_s", "{:.2f}"),
    ("`sync()` after 1 note changed (s)", "incr_sync_s", "{:.2f}"),
    ("first search after that sync (ms)", "after_sync_ms", "{:,.1f}"),
    ('`keyword_backend="fts5"`: `sync()` on switching (s)', "fts5_sync_s", "{:.2f}"),
    ('`keyword_backend="fts5"`: 1st search (ms)', "fts5_first_ms", "{:,.1f}"),
    ('`keyword_backend="fts5"`: p50 (ms)', "fts5_p50_ms", "{:,.1f}"),
    ('`keyword_backend="fts5"`: p95 (ms)', "fts5_p95_ms", "{:,.1f}"),
]


def table(report: dict[str, Any]) -> str:
    res = report["results"]
    names = list(res)
    counts = {"fresh": report["queries"]["fresh"], "cli": report["queries"]["cli"],
              "n": report["queries"]["n"]}  # fmt: skip
    ratio = len(names) > 1
    head = ["", *names] + [f"{n} / {names[0]}" for n in names[1:]] * ratio
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for label, key, fmt in ROWS:
        values = [res[n].get(key) for n in names]
        if all(v is None for v in values):
            continue
        if fmt.startswith("/"):
            total = counts[fmt[2:-1]]
            cells = [f"{v}/{total}" if v is not None else "n/a" for v in values]
            ratios = [""] * (len(names) - 1)
        else:
            cells = [fmt.format(v) if v is not None else "n/a" for v in values]
            ratios = [
                f"{v / values[0]:.2f}x" if v is not None and values[0] else "" for v in values[1:]
            ]
        row = [label.format(**counts), *cells] + ratios * ratio
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def parse_codes(specs: list[str]) -> dict[str, Path]:
    codes: dict[str, Path] = {}
    for spec in specs or [f"this={ROOT}"]:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise SystemExit(f"--code takes NAME=PATH; got {spec!r}")
        folder = Path(path).expanduser().resolve()
        if not (folder / "memmw" / "__init__.py").is_file():
            raise SystemExit(f"--code {name}: no memmw package in {folder}")
        if name in codes:
            raise SystemExit(f"--code {name} given twice")
        codes[name] = folder
    return codes


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_worker"]:
        worker(argv[1])
        return 0
    parser = argparse.ArgumentParser(
        description=(__doc__ or "").split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="See the module docstring (benchmarks/scale.py) for what each figure means.",
    )
    parser.add_argument(
        "source",
        help="the LoCoMo data folder (e.g. ../shared/benchmarks/locomo-dev) or 'synthetic'",
    )
    parser.add_argument("--files", type=int, default=5000, help="daily notes (default 5000)")
    parser.add_argument(
        "--file-chars", type=int, default=FILE_CHARS,
        help=f"mean characters of turns per note (default {FILE_CHARS}; LoCoMo only)",
    )  # fmt: skip
    parser.add_argument(
        "--code", action="append", default=[], metavar="NAME=PATH",
        help="a checkout to measure (repeatable; default: this one, as 'this')",
    )  # fmt: skip
    parser.add_argument("--queries", type=int, default=300, help="warm searches (default 300)")
    parser.add_argument("--fresh", type=int, default=20, help="first searches of a fresh process")
    parser.add_argument("--cli-queries", type=int, default=20, help="one-shot CLI searches")
    parser.add_argument("--fts5-queries", type=int, default=100, help="FTS5 backend searches")
    parser.add_argument("--repeats", type=int, default=1, help="full index runs (median)")
    parser.add_argument("--search-repeats", type=int, default=1, help="fresh search processes")
    parser.add_argument("--skip-fts5", action="store_true")
    parser.add_argument("--skip-incremental", action="store_true")
    parser.add_argument("--seed", type=int, default=SEED)
    parser.add_argument("--out", help="work folder (default: a temporary folder)")
    parser.add_argument("--json", help="write the raw figures here (default <out>/scale.json)")
    parser.add_argument("--keep", action="store_true", help="keep the workspace and indexes")
    parser.add_argument("--python", default=sys.executable, help="interpreter of the children")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per child process")
    args = parser.parse_args(argv)
    if args.source != "synthetic" and not (Path(args.source) / "queries.jsonl").is_file():
        parser.error(f"{args.source}: not a LoCoMo data folder (no queries.jsonl)")
    codes = parse_codes(args.code)
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="memmw-scale-"))
    out.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    try:
        report = measure(args, codes, out)
    finally:
        if not args.keep:
            for names in ("ws", "ws.json", "xdg-*", "state-*", "spec-*", "keyword-only.toml"):
                for child in out.glob(names):
                    if child.is_dir():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
    report["run_s"] = time.perf_counter() - started
    report["command"] = " ".join(["python", "benchmarks/scale.py", *argv])
    json_path = Path(args.json) if args.json else out / "scale.json"
    json_path.write_text(json.dumps(report, indent=1), encoding="utf-8")
    ws = report["workspace"]
    print(
        f"# memmw scale: {ws['notes']} notes ({ws['markdown_mb']:.0f} MB of Markdown, "
        f"{args.source}, seed {args.seed}); keyword-only; python {report['python']}, "
        f"{report['cpus']} cpus; whole run {report['run_s'] / 60:.1f} min"
    )
    load = report["load_1min"]
    print(
        f"# load average (1 min) as the children started: {load['min']:.1f} to "
        f"{load['max']:.1f}, median {load['median']:.1f}"
    )
    for name, info in report["checkouts"].items():
        print(f"# {name}: {info['git']} ({info['path']})")
    print()
    print(table(report))
    print(f"\nraw figures: {json_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
