"""Edge benchmark: the "Trustworthy at the edges" done-when figures (issue 9).

Usage::

    python benchmarks/edges.py [--only append,forget,hang,hang-index,redact] [--seconds 60] [--json OUT]

* ``append``: one agent calls ``memory_append`` every 50 ms while another process
  appends lines to the same note with the shell's ``>>`` (a ``sh`` loop) for
  ``--seconds``; then every line written by either side is looked for in the note.
  Reported: lines written by each side, lines found, lines lost, and whether the bytes
  written before the run are unchanged.
* ``forget``: ``memmw forget`` (``Memory.forget``, as fast as it goes) retracts the
  entries of a CRLF note one by one while an agent thread calls ``memory_append`` every
  20 ms and another process appends with the shell's ``>>``, for ``--seconds``. Reported:
  lines written by each side, lines lost (an acknowledged agent line, a shell line or an
  entry missing afterwards; must be 0), forgets done and refused (with why), and whether
  every byte outside the retracted lines is unchanged (CRLF included).
* ``hang``: a fake OpenAI-compatible provider on 127.0.0.1 that answers until told to
  hang (it then holds every request open until the run ends). At DEFAULT settings
  (``remote.timeout_s`` 60 s, ``remote.query_timeout_s`` 3 s, ``remote.sync_wait_s``
  10 s, the default breaker): the first search's latency (keyword results, ``partial``),
  median/p95/max over 50 later searches, a fresh second process's first search (it reads
  the open breaker from the state folder; the provider's start-up, the OpenAI SDK import,
  is timed apart), and how long a sync waits on the hung provider
  with a closed breaker (fresh state folder) against its bound ``remote.sync_wait_s``.
  Then ``hang-index`` (also run by ``hang``): ``memmw index`` as a new process against
  the hung provider, DEFAULT settings, a fresh state folder (closed breaker) and 40
  notes of ~1.2 kB (the first batch is several requests): its wall time and exit code
  three times in a row (the second run's timeout opens the shared breaker, the third
  fails fast), against the bound ``remote.timeout_s``; and ``memmw status --deep`` and
  ``memmw doctor`` wall times (their probe's bound is ``remote.query_timeout_s``).
* ``redact``: every credential form of ``benchmarks/credential_forms.json`` goes through
  the conversation paths of a custom-loop agent with ``sources = memory + sessions``:
  the user pastes it and the model echoes it (transcript), a tool error echoes it (error
  text), the flush turn writes the conversation into today's note with ``memory_append``
  (flush note), ``/new`` archives the session; a note holding every secret is written
  and then deleted. After a sync, each secret is looked for in the index file's raw
  bytes (``.sqlite``, ``-wal``, ``-shm``), in ``memory_search`` snippets (the secret as
  the query), in the telemetry log, in the workspace notes and in every log record
  (raw, and through ``RedactingFilter`` as the CLI logs them) and in the transcript
  JSONL file. Reported: forms tried and leaks per place (target 0).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memmw import Memory, MemoryConfig  # noqa: E402
from memmw.agent.tools import build_memory_tools, search_payload, tools_by_name  # noqa: E402
from memmw.config import RemoteConfig  # noqa: E402
from memmw.testing import fake_vector  # noqa: E402


def _shell_appender(seconds: float, note: Path) -> subprocess.Popen[str]:
    """The other writer: a POSIX shell appending ``shell line N`` with ``>>`` for ``seconds``;
    it prints how many lines it wrote when it ends."""
    return subprocess.Popen(
        [
            "sh",
            "-c",
            'i=0; end=$(( $(date +%s) + $1 )); while [ "$(date +%s)" -lt "$end" ]; do '
            'i=$((i+1)); echo "shell line $i" >> "$2"; done; echo "$i"',
            "sh",
            str(int(seconds)),
            str(note),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


def bench_append(seconds: float) -> dict[str, Any]:
    """Agent appends every 50 ms vs a ``>>`` shell loop in another process."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        note = ws / "memory" / "2026-03-01.md"
        prefix = b"# Notes\r\nwritten with CRLF before the run\r\n"
        note.write_bytes(prefix)
        mem = Memory(ws, Path(tmp) / "state", config=MemoryConfig(provider="none"))
        append = tools_by_name(build_memory_tools(mem))["memory_append"]
        shell = _shell_appender(seconds, note)
        agent_lines = 0
        errors = 0
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            agent_lines += 1
            out = append.invoke({"content": f"agent line {agent_lines}", "path": note.relative_to(ws).as_posix()})
            if out.get("status") != "ok":
                errors += 1
            time.sleep(0.05)
        shell_out, _ = shell.communicate(timeout=seconds + 30)
        shell_lines = int(shell_out.strip() or 0)
        mem.close()
        data = note.read_bytes()
        lines = set(data.decode("utf-8").splitlines())
        agent_found = sum(1 for i in range(1, agent_lines + 1) if f"agent line {i}" in lines)
        shell_found = sum(1 for i in range(1, shell_lines + 1) if f"shell line {i}" in lines)
        return {
            "seconds": seconds,
            "agentLinesWritten": agent_lines,
            "agentLinesFound": agent_found,
            "agentErrors": errors,
            "shellLinesWritten": shell_lines,
            "shellLinesFound": shell_found,
            "linesLost": (agent_lines - agent_found) + (shell_lines - shell_found),
            "prefixUnchanged": data.startswith(prefix),
            "noteBytes": len(data),
        }


def bench_forget(seconds: float, entries: int = 3000) -> dict[str, Any]:
    """Forgets beside an agent appending every 20 ms and a ``>>`` shell loop."""
    from memmw.errors import ForgetError

    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        note = ws / "memory" / "2026-03-01.md"
        rel = note.relative_to(ws).as_posix()
        header = b"# Notes\r\nwritten with CRLF before the run\r\n"
        note.write_bytes(header + b"".join(b"- entry %d\r\n" % i for i in range(entries)))
        mem = Memory(ws, Path(tmp) / "state", config=MemoryConfig(provider="none"))
        mem.sync()
        append = tools_by_name(build_memory_tools(mem))["memory_append"]
        shell = _shell_appender(seconds, note)
        deadline = time.monotonic() + seconds
        agent = {"lines": 0, "errors": 0}

        def agent_loop() -> None:
            while time.monotonic() < deadline:
                agent["lines"] += 1
                out = append.invoke({"content": f"agent line {agent['lines']}", "path": rel})
                if out.get("status") != "ok":
                    agent["errors"] += 1
                time.sleep(0.02)

        thread = threading.Thread(target=agent_loop)
        thread.start()
        done: list[int] = []
        refused: dict[str, int] = {}
        entry = 0
        while time.monotonic() < deadline and entry < entries:
            line = entry + 3  # entry i sits on line i + 3 (two header lines)
            # Half cite the text they saw (expect); half the bare line (checked against
            # the index, synced by the previous forget; appends since are fine).
            expect = f"entry {entry}" if entry % 2 == 0 else None
            try:
                mem.forget(f"{rel}#L{line}", reason="bench", expect=expect)
                done.append(entry)
            except ForgetError as exc:
                why = str(exc).split(";")[0].split(": ", 1)[-1]
                refused[why] = refused.get(why, 0) + 1
            entry += 1
        thread.join()
        shell_out, _ = shell.communicate(timeout=seconds + 30)
        shell_lines = int(shell_out.strip() or 0)
        mem.close()
        data = note.read_bytes()
        lines = data.split(b"\r\n")
        found = {ln.rstrip(b"\r").decode("utf-8") for chunk in lines for ln in chunk.split(b"\n")}
        agent_found = sum(1 for i in range(1, agent["lines"] + 1) if f"agent line {i}" in found)
        shell_found = sum(1 for i in range(1, shell_lines + 1) if f"shell line {i}" in found)
        struck = set(done)
        entries_ok = 0
        for i in range(entries):
            raw = lines[i + 2] if i + 2 < len(lines) else b""
            if i in struck:
                entries_ok += raw.startswith(b"- ~~entry %d~~ (retracted " % i)
            else:
                entries_ok += raw == b"- entry %d" % i
        return {
            "seconds": seconds,
            "agentLinesWritten": agent["lines"],
            "agentLinesFound": agent_found,
            "agentErrors": agent["errors"],
            "shellLinesWritten": shell_lines,
            "shellLinesFound": shell_found,
            "entries": entries,
            "entriesIntact": entries_ok,
            "linesLost": (agent["lines"] - agent_found)
            + (shell_lines - shell_found)
            + (entries - entries_ok),
            "forgetsDone": len(done),
            "forgetsRefused": sum(refused.values()),
            "refusedBecause": refused,
            "forgetsPerSecond": round(len(done) / seconds, 1),
            "headerUnchanged": data.startswith(header),
            "noteBytes": len(data),
        }


class _Provider:
    """A tiny OpenAI-compatible embeddings server that can be told to hang."""

    def __init__(self) -> None:
        self.hang = threading.Event()
        self.release = threading.Event()  # set at the end: the held requests then end
        self.requests = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                provider.requests += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if provider.hang.is_set():
                    provider.release.wait(900)  # far past every timeout (60 s per request)
                    return
                inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
                data = [
                    {"object": "embedding", "index": i, "embedding": fake_vector(t, 16)}
                    for i, t in enumerate(inputs)
                ]
                raw = json.dumps(
                    {"object": "list", "data": data, "model": body["model"],
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}}
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"


_SECOND_PROCESS = """
import json, sys, time
started = time.perf_counter()
sys.path.insert(0, sys.argv[1])
from memmw import Memory, MemoryConfig
from memmw.agent.tools import search_payload
from memmw.config import RemoteConfig
ws, state, url = sys.argv[2:5]
config = MemoryConfig(provider="openai", remote=RemoteConfig(base_url=url, api_key="sk-test"))
with Memory(ws, state, config=config) as mem:
    t0 = time.perf_counter()
    mem.selection  # the provider object (imports the OpenAI SDK); no request is sent
    start_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    payload = search_payload(mem, "kubernetes gateway")
    search_s = time.perf_counter() - t0
print(json.dumps({"searchS": search_s, "providerStartS": start_s,
                  "processS": time.perf_counter() - started,
                  "mode": payload["mode"], "results": len(payload["results"]),
                  "warning": payload.get("warning")}))
"""


def bench_hang() -> dict[str, Any]:
    """Search and sync latency against a provider that hangs, at default settings."""
    provider = _Provider()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(20):
            (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(
                f"Day {i}: we discussed topic {i}, the gateway and the kubernetes migration.\n"
            )
        # Default settings: only where the provider is.
        config = MemoryConfig(
            provider="openai", remote=RemoteConfig(base_url=provider.url, api_key="sk-test")
        )
        defaults = config.remote
        state = Path(tmp) / "state"
        mem = Memory(ws, state, config=config)
        mem.sync()
        healthy = [_timed(lambda: search_payload(mem, "kubernetes gateway")) for _ in range(5)]
        provider.hang.set()
        first_s, first = _timed_value(lambda: search_payload(mem, "kubernetes gateway"))
        later = [_timed(lambda: search_payload(mem, "kubernetes gateway")) for _ in range(50)]
        payload = search_payload(mem, "kubernetes gateway")
        second = json.loads(
            subprocess.run(
                [sys.executable, "-c", _SECOND_PROCESS, str(ROOT), str(ws), str(state),
                 provider.url],
                capture_output=True, text=True, check=True, timeout=600,
            ).stdout.strip().splitlines()[-1]
        )
        (ws / "memory" / "2026-02-01.md").write_text("A new note about the heron.\n")
        sync_open_s, _ = _timed_value(mem.sync)
        mem.close()
        # A sync on the hung provider with a closed breaker: a fresh state folder.
        fresh = Memory(ws, Path(tmp) / "state-fresh", config=config)
        sync_s, report = _timed_value(fresh.sync)
        fresh_hits = fresh.search("heron")
        fresh.close()
    provider.release.set()
    provider.server.shutdown()
    return {
        "settings": {
            "timeoutS": defaults.timeout_s,
            "queryTimeoutS": defaults.query_timeout_s,
            "syncWaitS": defaults.sync_wait_s,
        },
        "healthySearchMedianMs": round(statistics.median(healthy) * 1000, 1),
        "firstSearchS": round(first_s, 2),
        "firstSearchMode": first["mode"],
        "firstSearchPartial": first.get("partial", False),
        "firstSearchResults": len(first["results"]),
        "laterSearches": _summary(later),
        "laterMode": payload["mode"],
        "laterWarning": payload.get("warning"),
        "secondProcessProviderStartMs": round(second["providerStartS"] * 1000, 1),
        "secondProcessFirstSearchMs": round(second["searchS"] * 1000, 2),
        "secondProcessWallS": round(second["processS"], 2),
        "secondProcessMode": second["mode"],
        "secondProcessResults": second["results"],
        "syncWhileOpenS": round(sync_open_s, 3),
        "syncClosedBreakerS": round(sync_s, 2),
        "syncBoundS": defaults.sync_wait_s,
        "syncWarning": report.warning,
        "syncNewNoteFound": bool(fresh_hits),
    }


def _cli(args: list[str], url: str) -> tuple[float, int, str]:
    """Run ``memmw ARGS`` as a new process at default settings but the provider's URL."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
    env.update({"PYTHONPATH": str(ROOT), "MEMMW__PROVIDER": "openai",
                "MEMMW__REMOTE__BASE_URL": url, "MEMMW__REMOTE__API_KEY": "sk-test"})
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "memmw", *args], capture_output=True,
                          text=True, env=env, timeout=1800)
    return time.perf_counter() - started, proc.returncode, proc.stdout + proc.stderr


def bench_hang_index() -> dict[str, Any]:
    """``memmw index``, ``status --deep`` and ``doctor`` against a hung provider, defaults."""
    provider = _Provider()
    provider.hang.set()
    defaults = RemoteConfig()
    runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(40):
            line = f"Day {i}: the heron {i} nests by the lake with the kubernetes gateway. "
            (ws / "memory" / f"2026-01-{i % 28 + 1:02d}-n{i}.md").write_text(line * 16 + "\n")
        state = str(Path(tmp) / "state")
        for _ in range(3):
            before = provider.requests
            wall, code, output = _cli(["index", "-w", str(ws), "--state-dir", state, "--json"],
                                      provider.url)
            data = json.loads(output[output.index("{"): output.rindex("}") + 1])
            runs.append({"wallS": round(wall, 2), "exit": code, "requests": provider.requests - before,
                         "embedSeconds": data["embedSeconds"],
                         "pendingVectors": data["pendingVectors"],
                         "embedError": data["embedError"]})
        fresh = str(Path(tmp) / "state-probe")
        status_s, status_code, _ = _cli(["status", "-w", str(ws), "--state-dir", fresh, "--deep"],
                                        provider.url)
        doctor_s, doctor_code, doctor_out = _cli(
            ["doctor", "-w", str(ws), "--state-dir", str(Path(tmp) / "state-doctor"), "--json"],
            provider.url,
        )
        probe = next(c for c in json.loads(doctor_out[doctor_out.index("{"):])["checks"]
                     if c["name"] == "embedding probe")
    provider.release.set()
    provider.server.shutdown()
    return {
        "settings": {"timeoutS": defaults.timeout_s, "queryTimeoutS": defaults.query_timeout_s},
        "indexBoundS": defaults.timeout_s,
        "indexRuns": runs,
        "statusDeepS": round(status_s, 2),
        "statusDeepExit": status_code,
        "doctorS": round(doctor_s, 2),
        "doctorExit": doctor_code,
        "doctorProbe": probe["detail"],
    }


def bench_redact() -> dict[str, Any]:
    """Credential forms through transcript, error text, flush note and /new archive."""
    import logging

    from memmw.adapters.custom_loop import MemoryAgent
    from memmw.config import FlushConfig
    from memmw.middleware import MemoryMiddleware
    from memmw.redaction import RedactingFilter

    forms = json.loads((ROOT / "benchmarks" / "credential_forms.json").read_text("utf-8"))
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    keep = Keep(level=logging.DEBUG)
    root = logging.getLogger("memmw")
    old_level = root.level
    root.addHandler(keep)
    root.setLevel(logging.DEBUG)

    def model(messages: list[dict[str, Any]], tools: Any = None) -> dict[str, Any]:
        system = " ".join(str(m["content"]) for m in messages if m["role"] == "system")
        last = messages[-1]
        if "Memory flush before compaction" in system:
            if last["role"] == "tool":
                return {"content": "NO_REPLY"}
            said = "\n".join(f"- {m['content']}" for m in messages if m["role"] == "user")
            call = {"id": "f", "name": "memory_append", "args": {"content": said}}
            return {"content": "", "tool_calls": [call]}
        if last["role"] == "tool":
            return {"content": "done"}
        text = str(last["content"])
        if text.startswith("get "):  # a tool error that echoes its argument
            call = {"id": "g", "name": "memory_get", "args": {"path": text[4:]}}
            return {"content": "", "tool_calls": [call]}
        return {"content": f"Noted, you said: {text}"}

    try:
        with tempfile.TemporaryDirectory() as tmp:
            ws, state = Path(tmp) / "ws", Path(tmp) / "state"
            (ws / "memory").mkdir(parents=True)
            (ws / "MEMORY.md").write_text("# Facts\n- The gateway runs on port 8080.\n")
            gone = ws / "memory" / "2026-01-01.md"
            gone.write_text("".join(f"- {f['text']}\n" for f in forms), encoding="utf-8")
            config = MemoryConfig(
                provider="none", sources=("memory", "sessions"), flush=FlushConfig(enabled=True)
            )
            with Memory(ws, state, config=config) as mem:
                mem.sync()  # the note holding every secret is indexed ...
                gone.unlink()  # ... then deleted
                agent = MemoryAgent(model, mem, middleware=MemoryMiddleware(mem))
                for form in forms:
                    agent.chat(form["text"])
                    agent.chat("get " + form["text"])
                agent._flush(force=True)  # the silent flush turn writes the conversation
                flushed = sum(1 for o in agent.flushes if o.ran)
                agent.chat("/new")
                mem.sync()
                telemetry = b"".join(p.read_bytes() for p in state.rglob("telemetry/*.jsonl*"))
                notes = b"".join(p.read_bytes() for p in ws.rglob("*.md"))
                jsonl = b"".join(
                    p.read_bytes() for p in state.rglob("*.jsonl*") if "sessions" in p.parts
                )
                db = mem.db_path
                snippets: dict[str, str] = {}
                for form in forms:
                    hits = mem.search_result(form["secret"]).hits
                    snippets[form["name"]] = "\n".join(h.snippet for h in hits)
            sidecars = [Path(f"{db}{x}") for x in ("", "-wal", "-shm")]
            raw_db = b"".join(p.read_bytes() for p in sidecars if p.exists())
            archives = sorted(p.name for p in (ws / "memory").glob("*-*-*-*.md"))
    finally:
        root.removeHandler(keep)
        root.setLevel(old_level)
    log_raw = "\n".join(_log_text(r) for r in records)
    redactor = RedactingFilter()
    log_filtered = "\n".join(_log_text(r) for r in records if redactor.filter(r))
    places = {
        "indexFileBytes": lambda s: _in_text(s, raw_db),
        "searchSnippets": lambda s: any(s in text for text in snippets.values()),
        "telemetry": lambda s: _in_text(s, telemetry),
        "workspaceNotes": lambda s: _in_text(s, notes),
        "logsThroughRedactingFilter": lambda s: _in_text(s, log_filtered.encode()),
        "transcriptFile": lambda s: _in_text(s, jsonl),
    }
    leaks = {
        place: [f["name"] for f in forms if found(f["secret"])] for place, found in places.items()
    }
    return {
        "formsTried": len(forms),
        "paths": ["transcript", "toolErrorText", "flushNote", "newArchive", "deletedNote"],
        "flushTurns": flushed,
        "archives": archives,
        "leaks": {place: len(names) for place, names in leaks.items()},
        "leakedForms": {place: names for place, names in leaks.items() if names},
        "bytesSearched": {"index": len(raw_db), "telemetry": len(telemetry), "notes": len(notes)},
        "logRecords": len(records),
        "rawLogLeaks": [f["name"] for f in forms if _in_text(f["secret"], log_raw.encode())],
    }


def _in_text(secret: str, data: bytes) -> bool:
    """Whether ``secret`` stands in ``data`` as text does: not inside a longer run of
    letters and digits. A 4-digit PIN occurs by chance inside the hex hashes, timestamps
    and float timings that index files, telemetry and log records hold; a leaked one
    stands between spaces or punctuation."""
    pattern = rb"(?<![0-9A-Za-z])" + re.escape(secret.encode()) + rb"(?![0-9A-Za-z])"
    return re.search(pattern, data) is not None


def _log_text(record: Any) -> str:
    import logging

    text = record.getMessage()
    if record.exc_info and not record.exc_text:
        text += "\n" + logging.Formatter().formatException(record.exc_info)
    return text + ("\n" + record.exc_text if record.exc_text else "")


def _timed(fn: Any) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def _timed_value(fn: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    value = fn()
    return time.perf_counter() - started, value


def _summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
    return {
        "n": len(values),
        "medianMs": round(statistics.median(ordered) * 1000, 2),
        "p95Ms": round(p95 * 1000, 2),
        "maxMs": round(ordered[-1] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--only", default="append,forget,hang,redact")
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    wanted = set(args.only.split(","))
    if "append" in wanted:
        results["append"] = bench_append(args.seconds)
        print("append:", json.dumps(results["append"]), flush=True)
    if "forget" in wanted:
        results["forget"] = bench_forget(args.seconds)
        print("forget:", json.dumps(results["forget"]), flush=True)
    if "hang" in wanted:
        results["hang"] = bench_hang()
        print("hang:", json.dumps(results["hang"]), flush=True)
    if "hang" in wanted or "hang-index" in wanted:
        results["hangIndex"] = bench_hang_index()
        print("hang-index:", json.dumps(results["hangIndex"]), flush=True)
    if "redact" in wanted:
        results["redact"] = bench_redact()
        print("redact:", json.dumps(results["redact"], ensure_ascii=False), flush=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
