"""The ``memmw`` command line: every command, its error paths and its exit codes."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from memmw.cli import main
from memmw.cli.common import EXIT_BUSY, EXIT_DEGRADED, EXIT_ERROR, EXIT_OK, EXIT_USAGE
from memmw.embeddings.registry import register_provider, unregister_provider
from memmw.errors import ProviderError
from memmw.testing import FakeEmbeddingProvider
from memmw.workspace.locks import exclusive_lock, lock_path_for

ROOT = Path(__file__).resolve().parents[2]


def make_workspace(root: Path, fact: str = "The gateway runs on port 8443.") -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(
        f"# Facts\n- {fact}\n- Deploys happen on Tuesdays.\n", encoding="utf-8"
    )
    (root / "USER.md").write_text(
        "# User\n- Allergic to peanuts.\n- Prefers short answers.\n", encoding="utf-8"
    )
    (root / "memory" / "2026-01-02.md").write_text(
        "Met Dana about the rollout plan.\nThe rollback plan uses blue-green switches.\n",
        encoding="utf-8",
    )
    return root


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    return make_workspace(tmp_path / "ws")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code, out, _err = run(capsys, *args, "--json")
    data = json.loads(out)
    assert isinstance(data, dict), out
    return code, data


def subprocess_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items()
        if not k.startswith("MEMMW") and k not in ("OPENAI_API_KEY", "GEMINI_API_KEY")
    }
    env.update(
        PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
        XDG_STATE_HOME=str(tmp_path / "xdg-state"), MEMMW__PROVIDER="none",
    )
    env.update(extra)
    return env


# -- conventions ----------------------------------------------------------------------------
def test_bare_memmw_prints_help_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys)
    assert code == EXIT_OK
    assert "Usage: memmw" in out and "search" in out and "Exit codes" in out


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "--version")
    assert code == EXIT_OK and out.startswith("memmw ")


@pytest.mark.parametrize(
    "name", ["index", "search", "get", "status", "reset", "watch", "doctor", "mcp", "completion"]
)
def test_every_command_has_help_with_examples(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    code, out, _ = run(capsys, name, "--help")
    assert code == EXIT_OK
    assert "Example" in out
    assert "--workspace" in out and "--json" in out and "--quiet" in out  # global options


def test_help_documents_every_env_var(capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(capsys, "--help")
    flat = " ".join(out.split())
    for var in ("MEMMW_WORKSPACE", "MEMMW_STATE_DIR", "MEMMW_AGENT", "MEMMW_CONFIG",
                "MEMMW_LOG_LEVEL", "MEMMW__", "OPENAI_API_KEY", "GEMINI_API_KEY",
                "XDG_STATE_HOME", "_MEMMW_COMPLETE"):
        assert var in flat, var


def test_unknown_command_and_bad_log_level_are_usage_errors(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    code, _, err = run(capsys, "frobnicate")
    assert code == EXIT_USAGE and "No such command" in err
    code, _, err = run(capsys, "--log-level", "LOUD", "status", "-w", str(ws))
    assert code == EXIT_USAGE and "LOUD" in err


def test_global_options_work_before_and_after_the_command(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    code, before = run_json(capsys, "-w", str(ws), "--state-dir", str(state), "search", "gateway")
    assert code == EXIT_OK
    code, out, _ = run(capsys, "search", "gateway", "--workspace", str(ws), "--state-dir",
                       str(state), "--json")
    assert code == EXIT_OK
    assert json.loads(out) == before
    assert (state / "memory" / "main.sqlite").exists()


def test_completion_prints_a_script(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "completion", "bash")
    assert code == EXIT_OK and "_MEMMW_COMPLETE" in out
    code, _, _ = run(capsys, "completion", "tcsh")
    assert code == EXIT_USAGE


# -- index ------------------------------------------------------------------------------------
def test_index_reports_honest_time_and_json(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, _out, err = run(capsys, "index", "-w", str(ws))
    assert code == EXIT_OK
    assert re.search(r"Indexed: full rebuild \(no-index\); 3 added.*; \d+\.\d\ds", err)
    assert "Done in" in err
    code, data = run_json(capsys, "index", "-w", str(ws))
    assert code == EXIT_OK
    sync = data["sync"]
    assert isinstance(sync, dict) and sync["filesUnchanged"] == 3
    assert data["pendingVectors"] == 0 and data["provider"] == "none"
    assert isinstance(data["elapsedSeconds"], float)


def test_index_quiet_prints_nothing(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, err = run(capsys, "index", "-w", str(ws), "--quiet")
    assert code == EXIT_OK and out == "" and err == ""


def test_index_busy_no_wait_exits_3(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    code, out, err = run(capsys, "status", "-w", str(ws), "--json")
    db = Path(json.loads(out)["dbPath"])
    with exclusive_lock(lock_path_for(db)):
        code, _, err = run(capsys, "index", "-w", str(ws), "--no-wait")
    assert code == EXIT_BUSY and "busy" in err


def test_second_index_says_what_it_waits_for(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    _, out, _ = run(capsys, "status", "-w", str(ws), "--json")
    db = Path(json.loads(out)["dbPath"])
    held = threading.Event()

    def hold() -> None:
        with exclusive_lock(lock_path_for(db)):
            held.set()
            time.sleep(0.5)

    t = threading.Thread(target=hold)
    t.start()
    held.wait(5)
    code, _, err = run(capsys, "index", "-w", str(ws))
    t.join()
    assert code == EXIT_OK
    assert "Waiting for another memmw process" in err and str(db) in err


def test_index_reports_skipped_files_as_degraded(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    (ws / "memory" / "broken.md").write_bytes(b"\xff\xfe\x00binary\x00")
    code, _, err = run(capsys, "index", "-w", str(ws))
    assert code == EXIT_DEGRADED
    assert "skipped memory/broken.md" in err


# -- search -----------------------------------------------------------------------------------
def test_search_text_and_json_payload(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "search", "-w", str(ws), "which", "port", "does", "the",
                       "gateway", "use")
    assert code == EXIT_OK
    first = out.splitlines()[0]
    assert re.match(r"^\d\.\d{3}  MEMORY\.md:\d+-\d+$", first), out
    code, data = run_json(capsys, "search", "-w", str(ws), "--query", "gateway port")
    assert code == EXIT_OK
    assert set(data) >= {"results", "provider", "model", "fallback", "citations", "mode"}
    results = data["results"]
    assert isinstance(results, list) and results
    assert results[0]["path"] == "MEMORY.md" and "startLine" in results[0]


def test_search_json_is_the_memory_search_tool_payload(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path
) -> None:
    from memmw import Memory
    from memmw.agent.tools import build_memory_tools

    state = tmp_path / "state"
    code, data = run_json(capsys, "search", "rollback plan", "-w", str(ws), "--state-dir",
                          str(state))
    assert code == EXIT_OK
    with Memory(workspace=ws, state_dir=state) as mem:
        tool = build_memory_tools(mem)[0]
        assert tool.invoke({"query": "rollback plan"}) == data


def test_search_scores_follow_the_printed_order(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    ws = make_workspace(tmp_path / "ws")
    lines = "\n".join(f"- note {i}: the deploy pipeline step {i} runs checks" for i in range(30))
    (ws / "memory" / "2026-01-03.md").write_text(lines + "\n", encoding="utf-8")
    code, data = run_json(capsys, "search", "deploy pipeline checks", "-w", str(ws), "-n", "10",
                          "--log-level", "error")
    scores = [r["score"] for r in data["results"]]  # type: ignore[union-attr]
    assert code == EXIT_OK and len(scores) > 1
    assert all(0.0 <= s <= 1.0 for s in scores)


def test_explicit_min_score_is_strict_and_range_checked(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    query = "gateway deploys dana peanuts answers switches"
    _, data = run_json(capsys, "search", "-w", str(ws), query)
    scores = sorted(r["score"] for r in data["results"])  # type: ignore[union-attr]
    assert len(scores) >= 3 and scores[0] < scores[-1]
    cut = (scores[0] + scores[-1]) / 2
    _, strict = run_json(capsys, "search", "-w", str(ws), query, "--min-score", f"{cut:.6f}")
    kept = [r["score"] for r in strict["results"]]  # type: ignore[union-attr]
    assert kept and all(s >= cut for s in kept)
    assert len(kept) == sum(1 for s in scores if s >= cut)
    for bad in ("5", "-0.1", "abc"):
        code, _, err = run(capsys, "search", "-w", str(ws), "gateway", "--min-score", bad)
        assert code == EXIT_USAGE and "--min-score" in err


def test_search_needs_a_query(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, _, err = run(capsys, "search", "-w", str(ws))
    assert code == EXIT_USAGE and "query is required" in err
    code, _, err = run(capsys, "search", "-w", str(ws), "x", "--max-results", "0")
    assert code == EXIT_USAGE


def test_search_refreshes_the_keyword_index_when_files_changed(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    with (ws / "memory" / "2026-01-02.md").open("a", encoding="utf-8") as fh:
        fh.write("The staging database is called heron.\n")
    code, data = run_json(capsys, "search", "-w", str(ws), "heron staging database")
    assert code == EXIT_OK
    assert any("heron" in r["snippet"] for r in data["results"])  # type: ignore[union-attr]


def test_search_with_vectors_pending_is_keyword_only_and_does_not_embed(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "fake")
    assert run(capsys, "index", "-w", str(ws), "--no-embed")[0] == EXIT_OK
    code, _out, err = run(capsys, "search", "-w", str(ws), "gateway")
    assert code == EXIT_OK
    assert "keyword-only" in err
    _, status = run_json(capsys, "status", "-w", str(ws))
    vector = status["vector"]
    assert isinstance(vector, dict) and vector["vectors"] == 0 and vector["pending"] > 0


def test_sigpipe_exits_quietly(tmp_path: Path) -> None:
    ws = make_workspace(tmp_path / "ws")
    body = "\n\n".join(f"- item {i}: the release train leaves on schedule " + "x" * 600
                       for i in range(300))
    (ws / "memory" / "2026-01-04.md").write_text(body + "\n", encoding="utf-8")
    env = subprocess_env(tmp_path)
    subprocess.run([sys.executable, "-m", "memmw", "-w", str(ws), "index", "-q"], env=env,
                   check=True, timeout=120)
    cmd = (f"set -o pipefail; {sys.executable} -m memmw -w {ws} search release train "
           "--max-results 200 | head -2")
    proc = subprocess.run(["bash", "-c", cmd], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 2


# -- get ----------------------------------------------------------------------------------------
def test_get_prints_lines_and_errors(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "get", "-w", str(ws), "MEMORY.md", "--from", "2", "--lines", "1")
    assert code == EXIT_OK and out.startswith("- The gateway runs on port 8443.\n")
    assert "continue with from=3" in out
    code, data = run_json(capsys, "get", "-w", str(ws), "USER.md")
    assert code == EXIT_OK and data["status"] == "ok" and data["from"] == 1
    code, _, err = run(capsys, "get", "-w", str(ws), "memory/2030-01-01.md")
    assert code == EXIT_ERROR and "not found" in err
    code, _, err = run(capsys, "get", "-w", str(ws), "../etc/passwd")
    assert code == EXIT_ERROR and "error" in err
    code, _, _ = run(capsys, "get", "-w", str(ws), "MEMORY.md", "--from", "0")
    assert code == EXIT_USAGE


# -- status -----------------------------------------------------------------------------------
def test_status_table_and_json(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "status", "-w", str(ws))
    assert code == EXIT_OK
    assert "Last sync" in out and "never" in out and "not built yet" in out
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    code, data = run_json(capsys, "status", "-w", str(ws))
    assert code == EXIT_OK
    assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", str(data["lastSync"]))
    assert data["files"] == 3 and data["degraded"] == []

    def keys(value: object) -> Iterator[str]:
        if isinstance(value, dict):
            for k, v in value.items():
                yield k
                yield from keys(v)
        elif isinstance(value, list):
            for v in value:
                yield from keys(v)

    snake = [k for k in keys(data) if "_" in k]
    assert snake == [], snake
    code, out, _ = run(capsys, "status", "-w", str(ws), "--deep")
    assert code == EXIT_OK and "FTS5" in out


def test_status_degraded_exit_4(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "openai")  # no key, no fallback
    code, out, _ = run(capsys, "status", "-w", str(ws))
    assert code == EXIT_DEGRADED
    assert "Degraded:" in out and "fix:" in out


def test_one_bad_transcript_line_exits_0_and_status_lists_it(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__SOURCES", '["memory", "sessions"]')
    state = tmp_path / "state"
    sessions = state / "agents" / "main" / "sessions"
    sessions.mkdir(parents=True)
    good = {"type": "message", "message": {"role": "user", "content": "the otter ledger"}}
    sep = {"type": "message", "message": {"role": "user", "content": "PDF\u2028capybara"}}
    (sessions / "s1.jsonl").write_bytes(
        json.dumps(good).encode() + b"\n" + b"[" * 1000 + b"]" * 1000 + b"\n"
        + json.dumps(sep, ensure_ascii=False).encode() + b"\n"
    )
    where = ("-w", str(ws), "--state-dir", str(state))
    code, _out, err = run(capsys, "index", *where)
    assert code == EXIT_OK, err
    assert "skipped sessions/s1.jsonl line 2: JSON nested deeper than 256 levels" in err
    code, data = run_json(capsys, "search", "otter ledger", "--corpus", "sessions", *where)
    assert code == EXIT_OK
    assert [r["path"] for r in data["results"]] == ["sessions/s1.jsonl"]  # type: ignore[index]
    code, data = run_json(capsys, "search", "capybara", "--corpus", "all", *where)
    assert code == EXIT_OK
    (hit,) = data["results"]  # type: ignore[misc]
    assert hit["endLine"] == 3 and "capybara" in hit["snippet"]
    _code, data = run_json(capsys, "status", *where)
    assert data["scan"]["issues"] == [  # type: ignore[index]
        {"path": "sessions/s1.jsonl", "line": 2, "reason": "JSON nested deeper than 256 levels"}
    ]
    assert any("line 2 of sessions/s1.jsonl" in d["what"] for d in data["degraded"])  # type: ignore[union-attr,index]


def test_mcp_token_is_printed_and_replaced(
    capsys: pytest.CaptureFixture[str], ws: Path, tmp_path: Path
) -> None:
    pytest.importorskip("mcp", reason="the MCP server needs the mcp extra")
    where = ("-w", str(ws), "--state-dir", str(tmp_path / "st"))
    code, out, err = run(capsys, "mcp", "--print-token", *where)
    token = out.strip()
    assert code == EXIT_OK and len(token) >= 40 and "mcp-token" in err
    token_file = tmp_path / "st" / "mcp-token"
    assert token_file.read_text().strip() == token and (token_file.stat().st_mode & 0o777) == 0o600
    assert run(capsys, "mcp", "--print-token", *where)[1].strip() == token  # stable
    code, out, err = run(capsys, "mcp", "--new-token", *where)
    assert code == EXIT_OK and out == "" and "new MCP HTTP token" in err
    code, out, _err = run(capsys, "mcp", "--print-token", *where)
    assert out.strip() not in ("", token) and out.strip() == token_file.read_text().strip()
    token_file.chmod(0o640)
    code, _out, err = run(capsys, "mcp", "--print-token", *where)
    assert code == EXIT_ERROR
    assert "accessible to other users" in err


# -- reset ----------------------------------------------------------------------------------
def test_reset(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, out, _ = run(capsys, "reset", "-w", str(ws), "--yes")
    assert code == EXIT_OK and "No index" in out and "nothing to delete" in out
    assert run(capsys, "index", "-w", str(ws))[0] == EXIT_OK
    code, _, err = run(capsys, "reset", "-w", str(ws))  # stdin is not a terminal
    assert code == EXIT_USAGE and "--yes" in err
    code, out, _ = run(capsys, "reset", "-w", str(ws), "-y")
    assert code == EXIT_OK and "Index deleted" in out
    assert (ws / "MEMORY.md").exists()


# -- state location -------------------------------------------------------------------------
def test_two_workspaces_without_state_dir_get_their_own_index(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = make_workspace(tmp_path / "a", fact="The alpha cluster is named walrus.")
    b = make_workspace(tmp_path / "b", fact="The beta cluster is named narwhal.")
    assert run(capsys, "index", "-w", str(a))[0] == EXIT_OK
    assert run(capsys, "index", "-w", str(b))[0] == EXIT_OK
    _, sa = run_json(capsys, "status", "-w", str(a))
    _, sb = run_json(capsys, "status", "-w", str(b))
    assert sa["dbPath"] != sb["dbPath"]
    assert str(tmp_path / "xdg-state" / "memmw" / "workspaces") in str(sa["dbPath"])
    _, ra = run_json(capsys, "search", "-w", str(a), "walrus")
    _, rb = run_json(capsys, "search", "-w", str(a), "narwhal", "--min-score", "0.01")
    assert ra["results"] and not rb["results"]
    _, rb2 = run_json(capsys, "search", "-w", str(b), "narwhal")
    assert rb2["results"]


def test_an_index_built_for_another_workspace_is_refused(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    a = make_workspace(tmp_path / "a")
    b = make_workspace(tmp_path / "b")
    state = str(tmp_path / "shared")
    assert run(capsys, "index", "-w", str(a), "--state-dir", state)[0] == EXIT_OK
    for cmd in (["index"], ["search", "gateway"]):
        code, _, err = run(capsys, *cmd, "-w", str(b), "--state-dir", state)
        assert code == EXIT_ERROR
        assert "was built for the workspace" in err and str(a.resolve()) in err
    _, data = run_json(capsys, "search", "gateway", "-w", str(a), "--state-dir", state)
    assert data["results"]  # A's index untouched


# -- fallback ----------------------------------------------------------------------------------
class _FailsAtRunTime(FakeEmbeddingProvider):
    def __init__(self) -> None:
        super().__init__(dims=32, model="flaky-v1")
        self.id = "flaky"

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        raise ProviderError("quota exhausted (429)")

    def embed_query(self, text: str) -> list[float]:
        raise ProviderError("quota exhausted (429)")


@pytest.fixture
def failing_provider(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    register_provider("flaky", lambda config: _FailsAtRunTime())
    monkeypatch.setenv("MEMMW__PROVIDER", "flaky")
    monkeypatch.setenv("MEMMW__FALLBACK", "fake")
    yield
    unregister_provider("flaky")


@pytest.mark.usefixtures("failing_provider")
def test_fallback_from_the_cli_ends_with_vectors(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    code, data = run_json(capsys, "index", "-w", str(ws), "--log-level", "error")
    assert code == EXIT_DEGRADED and data["fallbackFrom"] == "flaky"
    assert data["pendingVectors"] == 0, data
    assert data["provider"] == "fake"
    _, status = run_json(capsys, "status", "-w", str(ws), "--log-level", "error")
    vector, embedding = status["vector"], status["embedding"]
    assert isinstance(vector, dict) and vector["vectors"] > 0 and vector["pending"] == 0
    assert isinstance(embedding, dict) and embedding["fallbackFrom"] == "flaky"
    assert status["degraded"]
    # A new process retries the primary, switches again and searches the fallback's vectors.
    code, result = run_json(capsys, "search", "gateway", "-w", str(ws), "--log-level", "error")
    assert code == EXIT_DEGRADED and result["mode"] == "hybrid"
    fallback = result["fallback"]
    assert isinstance(fallback, dict) and fallback["from"] == "flaky"
    # Running index again keeps the vectors.
    run_json(capsys, "index", "-w", str(ws), "--log-level", "error")
    _, status = run_json(capsys, "status", "-w", str(ws), "--log-level", "error")
    assert status["vector"]["pending"] == 0  # type: ignore[index]


# -- doctor -------------------------------------------------------------------------------------
def test_doctor(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    code, data = run_json(capsys, "doctor", "-w", str(ws), "--no-probe")
    names = {c["name"] for c in data["checks"]}  # type: ignore[union-attr]
    assert {"workspace", "config", "index", "embedding provider", "file watches"} <= names
    assert code in (EXIT_OK, EXIT_DEGRADED)  # the index is not built yet: a warning
    index_check = next(c for c in data["checks"] if c["name"] == "index")  # type: ignore[union-attr]
    assert index_check["status"] == "warn" and "memmw index" in index_check["fix"]
    code, out, _ = run(capsys, "doctor", "-w", str(ws / "missing"))
    assert code == EXIT_ERROR and "FAIL" in out


def test_python_dash_m_memmw(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "memmw", "--version"], capture_output=True,
                          text=True, env=subprocess_env(tmp_path), timeout=60)
    assert proc.returncode == 0 and proc.stdout.startswith("memmw ")


def test_a_heading_never_answers_alone(capsys: pytest.CaptureFixture[str], ws: Path) -> None:
    # "# User" used to be a 7-character chunk of its own that outranked the entry below it.
    code, data = run_json(capsys, "search", "-w", str(ws), "does the user have any food allergies?")
    top = data["results"][0]  # type: ignore[index]
    assert code == EXIT_OK and top["path"] == "USER.md"
    assert "# User" in top["snippet"] and "Allergic to peanuts" in top["snippet"]


def test_search_with_a_provider_that_cannot_start_is_an_error(
    capsys: pytest.CaptureFixture[str], ws: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMMW__PROVIDER", "no-such-provider")
    code, _, err = run(capsys, "search", "gateway", "-w", str(ws))
    assert code == EXIT_ERROR  # no answer at all is an error, not "degraded"
    assert "no-such-provider" in err
    code, out, _ = run(capsys, "status", "-w", str(ws))
    assert code == EXIT_DEGRADED and "requested no-such-provider" in out


def test_status_deep_says_why_this_vector_path(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    code, out, _ = run(capsys, "status", "--deep", "-w", str(ws))
    assert code in (EXIT_OK, EXIT_DEGRADED)
    assert re.search(r"^Vector path\s+\S", out, re.M)


def test_a_missing_extra_path_says_how_to_fix_it(
    capsys: pytest.CaptureFixture[str], ws: Path
) -> None:
    (ws / "memmw.toml").write_text('extra_paths = ["missing-notes"]\n', encoding="utf-8")
    run(capsys, "index", "-w", str(ws))
    code, out, _ = run(capsys, "status", "-w", str(ws))
    assert code == EXIT_DEGRADED
    assert "extra path missing-notes" in out and "remove it from extra_paths" in out


def test_the_cli_log_handler_redacts_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 20: every log line the CLI prints passes the one redaction (errors echoing
    # a key, a DSN with its password).
    import io
    import logging

    from memmw.cli.common import Settings

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", [])
    monkeypatch.setattr(root, "level", root.level)
    stream = io.StringIO()
    monkeypatch.setattr(sys, "stderr", stream)
    Settings().configure_logging()
    try:
        logging.getLogger("memmw.x").warning(
            "provider said %s", "bad key sk-abc123def456 for postgresql://bob:hunter2@db/x"
        )
    finally:
        for handler in root.handlers:
            handler.flush()
    text = stream.getvalue()
    assert "provider said" in text and "sk-abc123def456" not in text and "hunter2" not in text


def test_status_names_messages_compacted_away_unsaved() -> None:
    from memmw.cli.commands.status import assess

    degraded, _ = assess({"flush": {"unsavedEvictions": 0, "sessions": []}})
    assert degraded == []
    degraded, _ = assess({
        "flush": {"unsavedEvictions": 5, "lastUnsavedAt": "2026-03-10T14:05:30+00:00",
                  "sessions": ["s1"]},
    })  # fmt: skip
    assert degraded[0]["what"] == "memory flush" and "5 messages" in degraded[0]["why"]
    assert "s1" in degraded[0]["why"]
