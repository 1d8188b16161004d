"""``memmw consolidate``: dry run explains, a run through an OpenAI-compatible server
(a stub on 127.0.0.1) applies, ``--undo`` restores byte for byte."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from memmw.cli import main
from memmw.cli.common import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from memmw.graph.telemetry import query_key, telemetry_path

MEMORY_MD = "# Memory\n- Deploy target: staging\n- Editor: vim\n"
DAILY = "# 2026-11-28\n- Decided: the deploy target is now production\n"
EDITS = {
    "edits": [
        {
            "op": "update",
            "file": "MEMORY.md",
            "line": 2,
            "text": "Deploy target: production",
            "sources": [{"path": "memory/2026-11-28.md", "line": 2, "quote": "now production"}],
        }
    ]
}


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(MEMORY_MD, encoding="utf-8")
    (root / "memory" / "2026-11-28.md").write_text(DAILY, encoding="utf-8")
    state = tmp_path / "state"
    log = telemetry_path(state, "main")
    log.parent.mkdir(parents=True)
    with log.open("w", encoding="utf-8") as fh:
        for q in ("deploy target", "where do we deploy", "prod or staging"):
            event = {"ts": time.time(), "event": "search", "hits": 1, "q": query_key(q),
                     "cites": ["memory/2026-11-28.md#L2-L2"]}
            fh.write(json.dumps(event) + "\n")
    return root


@pytest.fixture
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    seen: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            seen.append(body)
            reply = {
                "id": "x", "object": "chat.completion", "created": 0, "model": body["model"],
                "choices": [{"index": 0, "finish_reason": "stop",
                             "message": {"role": "assistant", "content": json.dumps(EDITS)}}],
            }
            data = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", seen
    httpd.shutdown()
    httpd.server_close()


def cli(capsys: pytest.CaptureFixture[str], ws: Path, *args: str) -> tuple[int, str, str]:
    code = main(["-w", str(ws), "--state-dir", str(ws.parent / "state"), "consolidate", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_dry_run_lists_the_candidate_and_why(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    before = (ws / "MEMORY.md").read_bytes()
    code, out, _err = cli(capsys, ws, "--dry-run")
    assert code == EXIT_OK
    assert "CANDIDATE memory/2026-11-28.md#L2" in out
    assert "ok: recalled 3x" in out and "ok: by 3 distinct queries" in out
    assert (ws / "MEMORY.md").read_bytes() == before
    code, out, _err = cli(capsys, ws, "--dry-run", "--json")
    data = json.loads(out)
    assert data["status"] == "dry-run" and data["candidates"][0]["candidate"] is True


def test_a_run_without_a_configured_model_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    code, _out, err = cli(capsys, ws)
    assert code == EXIT_USAGE and "--dry-run" in err


def test_run_through_an_openai_compatible_server_then_undo(
    capsys: pytest.CaptureFixture[str],
    ws: Path,
    server: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, seen = server
    monkeypatch.setenv("MEMMW__CONSOLIDATION__PROVIDER", "openai-compatible")
    monkeypatch.setenv("MEMMW__CONSOLIDATION__BASE_URL", url)
    monkeypatch.setenv("MEMMW__CONSOLIDATION__MODEL", "stub")
    before = (ws / "MEMORY.md").read_bytes()
    code, out, err = cli(capsys, ws)
    assert code == EXIT_OK, err
    assert "applied" in out
    assert seen and "memory/2026-11-28.md#L2" in seen[0]["messages"][1]["content"]
    text = (ws / "MEMORY.md").read_text(encoding="utf-8")
    assert (
        "- Deploy target: production (source: memory/2026-11-28.md#L2) "
        "~~Deploy target: staging~~ (superseded "
    ) in text
    code, out, _err = cli(capsys, ws, "--undo")
    assert code == EXIT_OK and "restored MEMORY.md" in out
    assert (ws / "MEMORY.md").read_bytes() == before


def test_a_refused_run_names_the_gate_and_exits_1(
    capsys: pytest.CaptureFixture[str],
    ws: Path,
    server: tuple[str, list[dict[str, Any]]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    url, _seen = server
    monkeypatch.setenv("MEMMW__CONSOLIDATION__PROVIDER", "openai-compatible")
    monkeypatch.setenv("MEMMW__CONSOLIDATION__BASE_URL", url)
    monkeypatch.setenv("MEMMW__BOOTSTRAP__MAX_CHARS_PER_FILE", "64")
    before = (ws / "MEMORY.md").read_bytes()
    code, _out, err = cli(capsys, ws)
    assert code == EXIT_ERROR and "refused by gate 'budget'" in err
    assert (ws / "MEMORY.md").read_bytes() == before
