"""The worked configurations in examples/config/ (and the README) run end to end: `memmw
index` and `memmw search` against a stub of each API on 127.0.0.1, with the TOML exactly as
written there (only the server address is pointed at the stub)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from memmw.cli import main

from .conftest import GeminiStub, OpenAIStub, StubServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "config"


@pytest.fixture(autouse=True)
def _new_user(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMMW"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))


def _workspace(tmp_path: Path, example: str, replace: dict[str, str] | None = None) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(ROOT / "examples" / "workspace", ws)
    text = (EXAMPLES / example).read_text(encoding="utf-8")
    for old, new in (replace or {}).items():
        assert old in text, (example, old)
        text = text.replace(old, new)
    (ws / "memmw.toml").write_text(text, encoding="utf-8")
    return ws


def _index_and_search(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[dict[str, object], dict[str, object]]:
    base = ["-w", str(ws), "--state-dir", str(ws.parent / "st"), "--json"]
    code = main([*base, "index"])
    index = json.loads(capsys.readouterr().out)
    assert code == 0, index
    code = main([*base, "search", "which machine runs the gateway?"])
    search = json.loads(capsys.readouterr().out)
    assert code == 0, search
    return index, search


def _check(index: dict[str, object], search: dict[str, object], provider: str, model: str) -> None:
    assert (index["provider"], index["model"]) == (provider, model)
    assert index["pendingVectors"] == 0 and index["embedded"] == index["sync"]["chunksTotal"]  # type: ignore[index]
    assert (search["provider"], search["model"], search["mode"]) == (provider, model, "hybrid")
    assert search["results"][0]["path"] == "MEMORY.md"  # type: ignore[index]


def test_openai(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    openai_stub: tuple[StubServer, OpenAIStub],
) -> None:
    server, _app = openai_stub
    ws = _workspace(tmp_path, "openai.toml")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key")
    monkeypatch.setenv("MEMMW__REMOTE__BASE_URL", f"{server.url}/v1")  # instead of api.openai.com
    index, search = _index_and_search(ws, capsys)
    _check(index, search, "openai", "text-embedding-3-small")
    posts = [r for r in server.requests if r.method == "POST"]
    assert posts and all(r.path == "/v1/embeddings" for r in posts)
    assert {r.json()["model"] for r in posts} == {"text-embedding-3-small"}
    assert {r.headers["authorization"] for r in posts} == {"Bearer sk-test-key"}


def test_gemini(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    gemini_stub: tuple[StubServer, GeminiStub],
) -> None:
    server, _app = gemini_stub
    ws = _workspace(tmp_path, "gemini.toml")
    monkeypatch.setenv("GEMINI_API_KEY", "g-test-key")
    monkeypatch.setenv("MEMMW__REMOTE__BASE_URL", server.url)
    index, search = _index_and_search(ws, capsys)
    _check(index, search, "gemini", "gemini-embedding-001")
    posts = [r for r in server.requests if r.method == "POST"]
    assert posts and all("models/gemini-embedding-001:batchEmbedContents" in r.path for r in posts)
    dims = {q.get("outputDimensionality") for r in posts for q in r.json()["requests"]}
    assert dims == {768}
    assert {r.headers.get("x-goog-api-key") for r in posts} == {"g-test-key"}


@pytest.mark.parametrize("with_key", [False, True])
def test_openai_compatible_server(
    with_key: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
    openai_stub: tuple[StubServer, OpenAIStub],
) -> None:
    server, _app = openai_stub
    replace = {"http://127.0.0.1:11434/v1": f"{server.url}/v1"}
    if with_key:
        replace['# api_key = "local-secret"'] = 'api_key = "local-secret"'
    ws = _workspace(tmp_path, "ollama.toml", replace)
    index, search = _index_and_search(ws, capsys)
    _check(index, search, "openai", "nomic-embed-text")
    posts = [r for r in server.requests if r.method == "POST"]
    assert posts and all(r.path == "/v1/embeddings" for r in posts)
    assert {r.json()["model"] for r in posts} == {"nomic-embed-text"}
    auth = {r.headers["authorization"] for r in posts}
    assert auth == ({"Bearer local-secret"} if with_key else {"Bearer unused"})
