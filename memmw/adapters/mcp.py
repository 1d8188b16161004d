"""An MCP server exposing memory_search, memory_get and memory_append (official ``mcp`` SDK)."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import re
import secrets
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memmw.agent.tools import MemoryTool, build_memory_tools
from memmw.errors import ConfigError

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

log = logging.getLogger(__name__)

#: Default port of the Streamable HTTP transport (always bound to a loopback address).
DEFAULT_PORT = 8765
LOOPBACK = ("127.0.0.1", "::1", "localhost")
#: File name of the HTTP transport's bearer token, in the state folder (mode 0600).
TOKEN_FILE = "mcp-token"
#: What a usable token looks like: at least 32 visible ASCII characters.
_TOKEN_TEXT = re.compile(r"^[\x21-\x7e]{32,}$")


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
    principal: str | None = None,
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
        principal: Who this server's client is (one principal per server, so per
            connection): its tools read and write only that person's private memory
            (``memory/principals/<id>/``) besides shared notes. None: the owner, or what
            ``session_key`` and ``dm_scope`` say.

    Raises:
        ConfigError: the ``mcp`` package is not installed, or a bad principal id.
    """
    _require_mcp()
    import anyio
    import mcp.types as types
    from mcp.server.lowlevel import Server

    from memmw import __version__
    from memmw.agent.prompts import APPEND_TOOL

    if tools is None:
        from memmw.consolidation.tool import consolidation_tools

        tools = [
            *build_memory_tools(
                memory, session_key=session_key, chat_type=chat_type, principal=principal
            ),
            *consolidation_tools(
                memory, session_key=session_key, chat_type=chat_type, principal=principal
            ),
        ]
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


async def serve_stdio(memory: Memory, principal: str | None = None) -> None:
    """Serve over stdin/stdout until the client closes the stream (as ``principal``)."""
    from mcp.server.stdio import stdio_server

    server = build_server(memory, principal=principal)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


def token_path(state_dir: str | os.PathLike[str]) -> Path:
    """Where the HTTP transport's bearer token lives: ``<state_dir>/mcp-token``."""
    return Path(state_dir) / TOKEN_FILE


def http_token(state_dir: str | os.PathLike[str], *, rotate: bool = False) -> str:
    """The bearer token of the HTTP transport, made on first use (or when ``rotate``).

    The token is 256 random bits (URL-safe base64) in ``<state_dir>/mcp-token``, created
    with mode 0600 so only its owner can read it. A new token is written to a temporary
    file and renamed over the old one, so a reader never sees half a token.

    Raises:
        ConfigError: the token file is readable or writable by other users, is not owned
            by this user, is not a regular file, or is empty; or it cannot be written.
    """
    path = token_path(state_dir)
    if not rotate:
        token = _read_token(path)
        if token is not None:
            return token
    path.parent.mkdir(parents=True, exist_ok=True)
    token = secrets.token_urlsafe(32)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                     0o600)
        try:
            os.write(fd, (token + "\n").encode("ascii"))
            os.fsync(fd)
        finally:
            os.close(fd)
        if rotate:
            os.replace(tmp, path)
        else:
            try:  # first use: keep a token another process made meanwhile
                os.link(tmp, path)
            except FileExistsError:
                existing = _read_token(path)
                if existing is not None:
                    return existing
                os.replace(tmp, path)
            except OSError:  # no hard links here (some network file systems)
                os.replace(tmp, path)
    except OSError as exc:
        raise ConfigError(f"cannot write the MCP token file {path}: {exc}") from exc
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    log.info("made a new MCP HTTP token in %s", path)
    return token


def _read_token(path: Path) -> str | None:
    """The token stored at ``path``; None when there is none; refuses an unsafe file."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read the MCP token file {path}: {exc}") from exc
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"the MCP token file {path} is not a regular file")
        if os.name == "posix":
            if st.st_uid != os.getuid():
                raise ConfigError(f"the MCP token file {path} belongs to another user; "
                                  "delete it and a new token is made")
            if st.st_mode & 0o077:
                raise ConfigError(
                    f"the MCP token file {path} is accessible to other users (mode "
                    f"{stat.S_IMODE(st.st_mode):03o}); the token may be known: run "
                    "'memmw mcp --new-token' to replace it"
                )
        token = os.read(fd, 4096).decode("ascii", "replace").strip()
    finally:
        os.close(fd)
    if not _TOKEN_TEXT.match(token):
        raise ConfigError(
            f"the MCP token file {path} holds no usable token; run 'memmw mcp --new-token'"
        )
    return token


#: The 401 body: a JSON-RPC error, so MCP clients show its message to the user.
_UNAUTHORIZED = json.dumps({
    "jsonrpc": "2.0",
    "id": None,
    "error": {
        "code": -32001,
        "message": "unauthorized: send the header 'Authorization: Bearer <token>'; "
        "'memmw mcp --print-token' prints the token",
    },
}).encode("utf-8")


class BearerAuth:
    """ASGI middleware: every HTTP request must carry ``Authorization: Bearer <token>``.

    The token is compared in constant time (:func:`hmac.compare_digest`). A request without
    it, or with another, gets ``401`` with ``WWW-Authenticate: Bearer`` and never reaches
    the MCP app; lifespan events pass through; other connection types are refused.
    """

    def __init__(self, app: Any, token: str) -> None:
        if not token:
            raise ValueError("an empty token would let anyone in")
        self.app = app
        self._token = token.encode("ascii")

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        kind = scope.get("type")
        if kind == "lifespan":
            await self.app(scope, receive, send)
            return
        if kind == "http" and self._authorized(scope):
            await self.app(scope, receive, send)
            return
        if kind == "websocket":  # not served; closed before the handshake (HTTP 403)
            await send({"type": "websocket.close", "code": 1008})
            return
        if kind != "http":
            return
        body = _UNAUTHORIZED
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"www-authenticate", b'Bearer realm="memmw"'),
            ],
        })
        await send({"type": "http.response.body", "body": body})

    def _authorized(self, scope: Any) -> bool:
        values = [v for k, v in scope.get("headers") or () if k.lower() == b"authorization"]
        if len(values) != 1:
            return False
        scheme, _, given = bytes(values[0]).strip().partition(b" ")
        if scheme.lower() != b"bearer":  # the scheme is case-insensitive (RFC 7235)
            return False
        return hmac.compare_digest(given.strip(), self._token)


def http_app(
    memory: Memory,
    *,
    token: str,
    host: str = "127.0.0.1",
    path: str = "/mcp",
    principal: str | None = None,
) -> Any:
    """An ASGI app serving MCP over Streamable HTTP at ``path``, behind a bearer token.

    The SDK enables DNS-rebinding protection for loopback hosts (Host and Origin checks);
    :class:`BearerAuth` answers 401 to every request without ``Authorization: Bearer
    <token>``.
    """
    server = build_server(memory, principal=principal)
    app = server.streamable_http_app(streamable_http_path=path, host=host)
    return BearerAuth(app, token)


def serve_http(
    memory: Memory,
    *,
    token: str,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    principal: str | None = None,
) -> None:
    """Serve over Streamable HTTP on a loopback address until interrupted.

    Args:
        memory: The engine the tools run against.
        token: The bearer token every request must carry (see :func:`http_token`).
        host: A loopback address.
        port: The TCP port.
        principal: Whom the server answers as (None: the owner).

    Raises:
        ConfigError: ``host`` is not a loopback address (the tools read and write the
            workspace; a token on an unencrypted connection is only safe on this machine).
    """
    if host not in LOOPBACK:
        raise ConfigError(
            f"the MCP HTTP server only binds a loopback address (127.0.0.1, ::1); got {host!r}"
        )
    import uvicorn

    uvicorn.run(http_app(memory, token=token, host=host, principal=principal), host=host,
                port=port, log_level="warning")


__all__ = [
    "DEFAULT_PORT",
    "LOOPBACK",
    "TOKEN_FILE",
    "BearerAuth",
    "build_server",
    "http_app",
    "http_token",
    "keep_fresh",
    "serve_http",
    "serve_stdio",
    "token_path",
]
