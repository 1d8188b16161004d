"""``memmw mcp``: serve the memory tools over the Model Context Protocol."""

from __future__ import annotations

import click

from memmw.cli.common import EXIT_OK, command, info, with_memory
from memmw.engine.memory import Memory

HELP = """Serve memory_search, memory_get, memory_append and memory_facts over MCP (stdio).

The tools take the same arguments and return the same payloads as the agent tools. The
index is synced at start (vectors are embedded in the background) and kept fresh while
the server runs (file watches when 'memmw[watch]' is installed, else a sync on search).
Logs go to stderr; stdout carries the protocol.

\b
Examples:
  memmw -w ~/agent mcp                       # stdio, for Claude Desktop / Cursor
  memmw -w ~/agent mcp --http --port 8765    # Streamable HTTP at http://127.0.0.1:8765/mcp
"""


@command(name="mcp", help=HELP, short_help="Serve the memory tools over MCP.")
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Loopback address to bind with --http (127.0.0.1 or ::1).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              help="Port with --http.")
@with_memory(one_shot=False)
def mcp(mem: Memory, use_http: bool, host: str, port: int) -> int:
    """Run the server until the client disconnects or Ctrl-C."""
    from memmw.adapters import mcp as mcpserver

    if use_http and host not in mcpserver.LOOPBACK:
        raise click.BadParameter(
            f"{host!r}: only a loopback address (127.0.0.1, ::1, localhost) is served; the "
            "tools read and write the workspace and have no authentication",
            param_hint="--host",
        )
    mcpserver.build_server(mem)  # fails early, with one line, when mcp is not installed
    fresh = mcpserver.keep_fresh(mem)
    if use_http:
        info(f"memmw MCP server on http://{host}:{port}/mcp ({mem.workspace}; {fresh})")
        mcpserver.serve_http(mem, host=host, port=port)
    else:
        import anyio  # only after build_server: the mcp extra brings it

        info(f"memmw MCP server on stdio ({mem.workspace}; {fresh})")
        anyio.run(mcpserver.serve_stdio, mem)
    return EXIT_OK
