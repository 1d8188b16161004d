"""An MCP server exposing memory_search, memory_get and memory_append (official ``mcp`` SDK)."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memmw.agent.tools import MemoryTool, build_memory_tools
from memmw.errors import ConfigError

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

log = logging.getLogger(__name__)

#: Default port of the Streamable HTTP transport (always bound to a loopback address).
DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "::1", "localhost")


def _require_mcp() -> None:
    try:
        import mcp  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            "the MCP server needs the mcp package: pip install 'memmw[mcp]'"
        ) from exc


def build_server(
    memory: Memory,
    tools: Sequence[MemoryTool] | None = None,
    *,
    session_key: str | None = None,
    chat_type: str | None = None,
) -> Any:
    """An ``mcp`` low-level server whose tools are the agent tools of ``memory``.

    The tools keep the agent tools' JSON schemas and payloads: each call returns the payload
    as JSON text and as structured content, errors included (``is_error`` is set when the
    payload carries an ``error``). After a successful ``memory_append`` the keyword index is
    synced before the call returns, so the next search finds the new lines.

    Args:
        memory: The engine the tools run against.
        tools: Tools to expose (default :func:`memmw.agent.tools.build_memory_tools`).
        session_key: Session key the default tools serve (a group key makes them group
            tools: the privacy gate then refuses private files under any name).
        chat_type: Chat type of that session (fails closed: only private kinds are direct).

    Raises:
        ConfigError: the ``mcp`` package is not installed.
    """
    _require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from memmw import __version__
    from memmw.agent.prompts import APPEND_TOOL

    if tools is None:
        tools = build_memory_tools(memory, session_key=session_key, chat_type=chat_type)
    by_name = {t.name: t for t in tools}

    def run_tool(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        tool = by_name.get(name)
        if tool is None:
            return {"error": f"unknown tool {name!r}; known: {', '.join(by_name)}"}
        payload = tool.invoke(arguments)
        if name == APPEND_TOOL and payload.get("status") == "ok":
            try:  # keyword-searchable at once; vectors follow in the background
                memory.sync(embeddings="background")
            except Exception as exc:  # the note is saved; freshness catches up later
                log.warning("sync after memory_append failed: %s", exc)
        return payload

    async def list_tools(_ctx: Any, _params: Any) -> Any:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=t.name, description=t.description, input_schema=t.parameters)
                for t in by_name.values()
            ]
        )

    async def call_tool(_ctx: Any, params: Any) -> Any:
        # The engine is synchronous (SQLite, embedding): keep the event loop free.
        payload = await anyio.to_thread.run_sync(
            run_tool, params.name, dict(params.arguments or {})
        )
        text = json.dumps(payload, indent=2, ensure_ascii=False, default=str)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=text)],
            structured_content=payload,
            is_error=bool(payload.get("error")),
        )

    return Server(
        "memmw",
        version=__version__,
        instructions="Long-term memory: search it before answering about prior work, "
        "decisions, people or preferences; save durable notes with memory_append.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def keep_fresh(memory: Memory) -> str:
    """Sync now (vectors in the background) and follow file edits while serving.

    Returns:
        How freshness is kept: ``watching`` (OS file watches), or ``on-search`` (each
        search starts a background sync when files may have changed).
    """
    memory.sync(embeddings="background")
    if not memory.config.sync.watch:
        return "on-search"
    try:
        state = memory.start_watching()
    except ConfigError as exc:  # watchdog not installed
        log.info("file watching unavailable (%s); syncing on search", exc)
        return "on-search"
    return "watching" if state == "watching" else "on-search"


async def serve_stdio(memory: Memory) -> None:
    """Serve over stdin/stdout until the client closes the stream."""
    from mcp.server.stdio import stdio_server

    server = build_server(memory)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def http_app(memory: Memory, *, host: str = "127.0.0.1", path: str = "/mcp") -> Any:
    """A Starlette app serving MCP over Streamable HTTP at ``path``.

    The SDK enables DNS-rebinding protection for loopback hosts (Host and Origin checks).
    """
    return build_server(memory).streamable_http_app(streamable_http_path=path, host=host)


def serve_http(memory: Memory, *, host: str = "127.0.0.1", port: int = DEFAULT_PORT) -> None:
    """Serve over Streamable HTTP on a loopback address until interrupted.

    Raises:
        ConfigError: ``host`` is not a loopback address (the tools read and write the
            workspace and have no authentication).
    """
    if host not in LOOPBACK:
        raise ConfigError(
            f"the MCP HTTP server only binds a loopback address (127.0.0.1, ::1); got {host!r}"
        )
    import uvicorn

    uvicorn.run(http_app(memory, host=host), host=host, port=port, log_level="warning")


__all__ = ["DEFAULT_PORT", "LOOPBACK", "build_server", "http_app", "keep_fresh", "serve_http", "serve_stdio"]
