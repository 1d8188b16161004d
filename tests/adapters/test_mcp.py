"""``memmw mcp`` driven over stdio by the official ``mcp`` client library."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

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
    assert is_error and "minScore" in bad["error"]
    assert seen["missing"]["status"] == "not_found"
    assert (ws / "memory" / "2026-01-05.md").read_text(encoding="utf-8").endswith("heron.\n")


def test_mcp_server_over_streamable_http(tmp_path: Path) -> None:
    import socket
    import subprocess
    import time

    from mcp.client.streamable_http import streamable_http_client

    ws = _workspace(tmp_path / "ws")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMMW")}
    env.update(PYTHONPATH=str(ROOT), HOME=str(tmp_path / "home"), MEMMW__PROVIDER="none")
    proc = subprocess.Popen(
        [sys.executable, "-m", "memmw", "mcp", "--http", "--port", str(port), "-w", str(ws),
         "--state-dir", str(tmp_path / "st")],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 90
        while True:  # wait for the port to accept connections
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
                assert time.monotonic() < deadline, "server did not start"
                time.sleep(0.2)

        async def drive() -> tuple[list[str], dict[str, Any]]:
            url = f"http://127.0.0.1:{port}/mcp"
            with anyio.fail_after(60):
                async with streamable_http_client(url) as streams, ClientSession(
                    streams[0], streams[1]
                ) as session:
                    await session.initialize()
                    tools = await session.list_tools()
                    found = await session.call_tool("memory_search", {"query": "gateway"})
                    return [t.name for t in tools.tools], _payload(found)

        names, found = anyio.run(drive)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if proc.stderr:
            proc.stderr.close()
    assert {"memory_search", "memory_get", "memory_append"} <= set(names)
    assert found["results"][0]["path"] == "MEMORY.md"
