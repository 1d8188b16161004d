"""Edge benchmark: the "Trustworthy at the edges" done-when figures (issue 9).

Usage::

    python benchmarks/edges.py [--only append,forget,hang] [--seconds 60] [--json OUT]

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
  hang (it then holds every request open far past the timeout). With
  ``remote.timeout_s = 0.5``: how long a sync waits on the hung provider (bound:
  ``timeout_s`` x tries plus backoff), the latency of the searches that open the
  breaker, and median/p95/max search latency over 50 searches after it opened.
"""

from __future__ import annotations

import argparse
import json
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
        # The other writer: a POSIX shell appending one line per iteration with >>.
        shell = subprocess.Popen(
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
        shell = subprocess.Popen(
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
        self.requests = 0
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                provider.requests += 1
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
                if provider.hang.is_set():
                    time.sleep(30)  # far past the client's timeout
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


def bench_hang() -> dict[str, Any]:
    """Sync and search latency against a provider that hangs, with the breaker."""
    from memmw.embeddings.breaker import BreakerPolicy

    provider = _Provider()
    timeout_s = 0.5
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "ws"
        (ws / "memory").mkdir(parents=True)
        for i in range(20):
            (ws / "memory" / f"2026-01-{i + 1:02d}.md").write_text(
                f"Day {i}: we discussed topic {i}, the gateway and the kubernetes migration.\n"
            )
        config = MemoryConfig(
            provider="openai",
            remote=RemoteConfig(base_url=provider.url, api_key="sk-test", timeout_s=timeout_s),
        )
        mem = Memory(ws, Path(tmp) / "state", config=config)
        mem.breaker_policy = BreakerPolicy(failure_threshold=2, probe_interval_s=600)
        mem.sync()
        healthy = [_timed(lambda: search_payload(mem, "kubernetes gateway")) for _ in range(5)]
        provider.hang.set()
        (ws / "memory" / "2026-02-01.md").write_text("A new note about the heron.\n")
        sync_s, _ = _timed_value(mem.sync)
        opening = []
        while not (mem._breaker and mem._breaker.is_open) and len(opening) < 5:
            opening.append(_timed(lambda: search_payload(mem, "kubernetes gateway")))
        after = [_timed(lambda: search_payload(mem, "kubernetes gateway")) for _ in range(50)]
        payload = search_payload(mem, "kubernetes gateway")
        sync_open_s, _ = _timed_value(mem.sync)
        mem.close()
    provider.server.shutdown()
    return {
        "timeoutS": timeout_s,
        "tries": 3,
        "boundS": round(timeout_s * 3 + 0.6 + 1.2, 2),
        "healthySearchMedianMs": round(statistics.median(healthy) * 1000, 1),
        "syncOnHungProviderS": round(sync_s, 2),
        "searchesWhileOpeningS": [round(x, 2) for x in opening],
        "afterOpen": _summary(after),
        "afterOpenMode": payload["mode"],
        "afterOpenWarning": payload.get("warning"),
        "syncWhileOpenS": round(sync_open_s, 3),
    }


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
    parser.add_argument("--only", default="append,forget,hang")
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
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
