"""``memmw mcp`` driven over stdio by the official ``mcp`` client library."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("mcp", reason="the MCP server needs the mcp extra")

import anyio
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

ROOT = Path(__file__).resolve().parents[1]


def _workspace(root: Path) -> Path:
    (root / "memory").mkdir(parents=True)
    (root / "MEMORY.md").write_text(
        "# Infra\n- The gateway runs on port 8443.\n", encoding="utf-8"
    )
    (root / "memory" / "2026-01-02.md").write_text(
        "Met Dana about the rollout plan.\n", encoding="utf-8"
    )
    return root


def _payload(result: Any) -> dict[str, Any]:
    text = result.content[0].text
    data = json.loads(text)
    assert isinstance(data, dict)
    assert result.structured_content == data  # the same payload, structured
    return data


async def _drive(params: StdioServerParameters) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        tools = await session.list_tools()
        seen["tools"] = {t.name: t.input_schema for t in tools.tools}
        seen["search"] = _payload(await session.call_tool("memory_search", {"query": "gateway port"}))
        seen["get"] = _payload(
            await session.call_tool("memory_get", {"path": "MEMORY.md", "from": 2, "lines": 1})
        )
        seen["append"] = _payload(
            await session.call_tool(
                "memory_append",
                {"content": "The staging database is called heron.", "path": "memory/2026-01-05.md"},
            )
        )
        seen["after"] = _payload(
            await session.call_tool("memory_search", {"query": "staging database heron"})
        )
        bad = await session.call_tool("memory_search", {"query": "x", "minScore": 7})
        seen["bad"] = (bad.is_error, _payload(bad))
        missing = await session.call_tool("memory_get", {"path": "memory/1999-01-01.md"})
        seen["missing"] = _payload(missing)
    return seen


def test_mcp_server_over_stdio(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
    env.update(
        PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"),
        XDG_STATE_HOME=str(tmp_path / "xdg"), MEMMW__PROVIDER="none",
    )
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "memmw", "mcp", "--workspace", str(ws), "--state-dir", str(tmp_path / "st")],
        env=env,
    )
    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(120):
            return await _drive(params)

    seen = anyio.run(bounded)
    from memmw.agent.tools import append_schema, get_schema, search_schema

    # The agent tools, with their own schemas (other memory tools may be served too).
    assert {name: seen["tools"].get(name) for name in ("memory_search", "memory_get",
                                                       "memory_append")} == {
        "memory_search": search_schema(),
        "memory_get": get_schema(),
        "memory_append": append_schema(),
    }
    search = seen["search"]
    assert search["results"][0]["path"] == "MEMORY.md"
    assert search["provider"] == "none" and search["mode"] == "keyword-only"
    assert seen["get"] == {
        "status": "ok", "text": "- The gateway runs on port 8443.", "path": "MEMORY.md",
        "from": 2, "lines": 1,
    }
    assert seen["append"]["status"] == "ok" and seen["append"]["path"] == "memory/2026-01-05.md"
    after = seen["after"]["results"]
    assert after and after[0]["path"] == "memory/2026-01-05.md"
    assert "heron" in after[0]["snippet"]
    is_error, bad = seen["bad"]
    assert is_error and "min_score (minScore) must be between 0 and 1; got 7" in bad["error"]  # the search says
    assert seen["missing"]["status"] == "not_found"
    assert (ws / "memory" / "2026-01-05.md").read_text(encoding="utf-8").endswith("heron.\n")


def _leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    inner = getattr(exc, "exceptions", None)
    if not inner:
        return [exc]
    return [leaf for e in inner for leaf in _leaves(e)]


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _post(url: str, headers: dict[str, str], host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """A raw MCP initialize POST (no SDK): status, headers, body."""
    import urllib.error
    import urllib.request

    body = json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "probe", "version": "0"}},
    }).encode()
    request = urllib.request.Request(url, data=body, method="POST", headers={
        "content-type": "application/json", "accept": "application/json, text/event-stream",
        **headers,
    })
    if host is not None:
        request.add_header("Host", host)
    try:
        with urllib.request.urlopen(request, timeout=30) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read()


def test_mcp_server_over_streamable_http(tmp_path: Path) -> None:
    import stat
    import subprocess
    import time

    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    ws = _workspace(tmp_path / "ws")
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"), MEMMW__PROVIDER="none")
    where = ["-w", str(ws), "--state-dir", str(tmp_path / "st")]
    proc = subprocess.Popen(
        [sys.executable, "-m", "memmw", "mcp", "--http", "--port", str(port), *where],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        import socket

        while True:  # wait for the port to accept connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)
        # The token was made on first use, readable by its owner only, and is printable.
        token_file = tmp_path / "st" / "mcp-token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        printed = subprocess.run(
            [sys.executable, "-m", "memmw", "mcp", "--print-token", *where],
            env=env, capture_output=True, text=True, timeout=120, check=True,
        ).stdout.strip()
        assert printed == token_file.read_text().strip() and len(printed) >= 40
        url = f"http://127.0.0.1:{port}/mcp"

        # Raw requests: no token, a wrong one, a wrong scheme -> 401 before any MCP work.
        for headers in ({}, {"Authorization": "Bearer " + "x" * len(printed)},
                        {"Authorization": f"Basic {printed}"}, {"Authorization": printed},
                        {"Authorization": f"Bearer {printed[:-1]}"}):
            status, got, body = _post(url, headers)
            assert status == 401, headers
            assert got.get("www-authenticate", got.get("WWW-Authenticate", "")).startswith("Bearer")
            assert "--print-token" in json.loads(body)["error"]["message"]
        status, _h, _b = _post(url, {"Authorization": f"bearer {printed}"})
        assert status == 200  # the scheme is case-insensitive
        # With the token, the SDK's Host check still stands (DNS rebinding).
        status, _h, _b = _post(url, {"Authorization": f"Bearer {printed}"}, host="evil.example")
        assert status in (400, 421)

        async def drive(token: str | None) -> tuple[list[str], dict[str, Any]]:
            headers = {"Authorization": f"Bearer {token}"} if token else None
            with anyio.fail_after(60):
                async with create_mcp_http_client(headers=headers) as http, streamable_http_client(
                    url, http_client=http
                ) as streams, ClientSession(streams[0], streams[1]) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    found = await session.call_tool("memory_search", {"query": "gateway"})
                    return [t.name for t in tools.tools], _payload(found)

        names, found = anyio.run(drive, printed)
        from mcp.shared.exceptions import MCPError

        with pytest.raises(BaseException) as refused:
            anyio.run(drive, None)
        errors = _leaves(refused.value)
        assert any(isinstance(e, MCPError) and "unauthorized" in str(e) for e in errors), errors
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    assert {"memory_search", "memory_get", "memory_append"} <= set(names)
    assert found["results"][0]["path"] == "MEMORY.md"


# -- the HTTP token and the auth middleware (no server) ------------------------------------


def test_the_token_is_made_once_owner_only_and_rotates(tmp_path: Path) -> None:
    import stat
    import threading

    from memmw.adapters.mcp import http_token, token_path

    state = tmp_path / "st"
    tokens: list[str] = []
    threads = [threading.Thread(target=lambda: tokens.append(http_token(state))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(tokens)) == 1 and len(tokens[0]) >= 40  # racing first uses agree
    path = token_path(state)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert path.read_text().strip() == tokens[0] == http_token(state)
    new = http_token(state, rotate=True)
    assert new != tokens[0] and http_token(state) == new
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert [p.name for p in state.iterdir()] == ["mcp-token"]  # no temporary files left


def test_an_unsafe_token_file_is_refused(tmp_path: Path) -> None:
    from memmw.adapters.mcp import http_token, token_path
    from memmw.errors import ConfigError

    state = tmp_path / "st"
    token = http_token(state)
    path = token_path(state)
    path.chmod(0o644)
    with pytest.raises(ConfigError, match=r"other users.*--new-token"):
        http_token(state)
    assert http_token(state, rotate=True) != token  # the way out
    path.write_text("short\n")
    with pytest.raises(ConfigError, match="no usable token"):
        http_token(state)
    path.unlink()
    (tmp_path / "elsewhere").write_text("x" * 50)
    path.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(ConfigError, match="cannot read"):
        http_token(state)


def _asgi(app: Any, scope: dict[str, Any]) -> tuple[int | None, list[dict[str, Any]]]:
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    anyio.run(app, scope, receive, send)
    status = next((m["status"] for m in sent if m["type"] == "http.response.start"), None)
    return status, sent


TOKEN = "t0k3n-" + "a" * 40


async def _ok_app(scope: Any, receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@settings(max_examples=200, deadline=None)
@given(
    headers=st.lists(
        st.tuples(
            st.sampled_from([b"authorization", b"Authorization", b"x-token", b"cookie"]),
            st.one_of(
                st.binary(max_size=60),
                st.sampled_from([
                    f"Bearer {TOKEN}".encode(), f"bearer {TOKEN}".encode(),
                    f"BEARER  {TOKEN} ".encode(), f"Basic {TOKEN}".encode(), TOKEN.encode(),
                    f"Bearer {TOKEN[:-1]}".encode(), f"Bearer {TOKEN}x".encode(), b"Bearer ",
                ]),
            ),
        ),
        max_size=3,
    )
)
def test_only_exactly_one_right_bearer_header_gets_through(
    headers: list[tuple[bytes, bytes]],
) -> None:
    from memmw.adapters.mcp import BearerAuth

    status, sent = _asgi(BearerAuth(_ok_app, TOKEN), {"type": "http", "headers": headers})
    auth = [v for k, v in headers if k.lower() == b"authorization"]
    pattern = rb"\s*(?i:bearer) \s*" + re.escape(TOKEN.encode()) + rb"\s*"
    right = len(auth) == 1 and re.fullmatch(pattern, auth[0]) is not None
    assert status == (200 if right else 401)
    if not right:
        start = sent[0]
        assert (b"www-authenticate", b'Bearer realm="memmw"') in start["headers"]


def test_the_middleware_passes_lifespan_and_closes_websockets() -> None:
    from memmw.adapters.mcp import BearerAuth

    seen: list[str] = []

    async def app(scope: Any, receive: Any, send: Any) -> None:
        seen.append(scope["type"])

    _asgi(BearerAuth(app, TOKEN), {"type": "lifespan"})
    _status, sent = _asgi(BearerAuth(app, TOKEN), {"type": "websocket", "headers": []})
    assert seen == ["lifespan"] and sent == [{"type": "websocket.close", "code": 1008}]
    with pytest.raises(ValueError):
        BearerAuth(app, "")
