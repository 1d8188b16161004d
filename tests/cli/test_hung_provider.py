"""``memmw index``, ``status --deep`` and ``doctor`` return against a provider that hangs.

The provider is a TCP server on 127.0.0.1 that accepts connections and never answers.
Per-request timeout 1 s here (60 s by default), query deadline 0.2 s: ``index`` stops embedding after one
timeout (no retry of a request nobody answered), reports the pending chunks and how to
resume, and exits 4; the probes answer within ``remote.query_timeout_s``.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from memmw.cli import main
from memmw.cli.common import EXIT_DEGRADED
from memmw.testing import require_optional


@pytest.fixture
def hung(monkeypatch: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """An OpenAI-compatible endpoint that accepts and never answers, configured by env."""
    require_optional("openai", "openai")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen(128)  # the kernel completes handshakes; nobody ever reads or replies
    monkeypatch.setenv("MEMMW__PROVIDER", "openai")
    monkeypatch.setenv("MEMMW__REMOTE__BASE_URL", f"http://127.0.0.1:{sock.getsockname()[1]}/v1")
    # The query deadline well below the request timeout: which of two equal timers fires
    # first is a race on a loaded machine.
    monkeypatch.setenv("MEMMW__REMOTE__TIMEOUT_S", "1.0")
    monkeypatch.setenv("MEMMW__REMOTE__QUERY_TIMEOUT_S", "0.2")
    try:
        yield sock
    finally:
        sock.close()


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    root = tmp_path / "ws"
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text("# Memory\n\n- The gateway runs on port 8443.\n")
    (root / "memory" / "2026-01-02.md").write_text("We planned the kubernetes migration.\n")
    return root


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_index_on_a_hung_provider_exits_4_with_the_pending_count_and_how_to_resume(
    hung: socket.socket, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _out, err = run(capsys, "index", "-w", str(ws))
    assert code == EXIT_DEGRADED
    assert "chunks have no vector yet" in err and "Timeout" in err
    assert "Run 'memmw index' again" in err
    code, out, _ = run(capsys, "index", "-w", str(ws), "--json")
    data = json.loads(out)
    assert code == EXIT_DEGRADED
    assert data["pendingVectors"] >= 2 and data["embedded"] == 0
    assert "Timeout" in data["embedError"] or "circuit open" in data["embedError"]
    # The chunks are found by keyword meanwhile.
    code, out, _ = run(capsys, "search", "-w", str(ws), "kubernetes migration", "--json")
    assert json.loads(out)["results"][0]["path"] == "memory/2026-01-02.md"


def test_status_deep_and_doctor_probe_within_the_query_deadline(
    hung: socket.socket, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, "status", "-w", str(ws), "--deep", "--json")
    probe = json.loads(out)["embedding"]["probe"]
    assert code == EXIT_DEGRADED
    assert probe["ok"] is False and "remote.query_timeout_s" in probe["error"]
    _code, out, _ = run(capsys, "doctor", "-w", str(ws), "--json")
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    check = checks["embedding probe"]
    assert check["status"] == "fail"
    # The probe went through the breaker: a deadline, or the circuit the status opened.
    assert "remote.query_timeout_s" in check["detail"] or "circuit" in check["detail"]
