"""``memmw mcp``: serve the memory tools over the Model Context Protocol."""

from __future__ import annotations

import click

from memmw.cli.common import EXIT_OK, command, info, out, with_memory
from memmw.engine.memory import Memory

HELP = """Serve memory_search, memory_get, memory_append and memory_facts over MCP (stdio).

The tools take the same arguments and return the same payloads as the agent tools. The
index is synced at start (vectors are embedded in the background) and kept fresh while
the server runs (file watches when 'memmw[watch]' is installed, else a sync on search).
Logs go to stderr; stdout carries the protocol.

With --http every request must carry 'Authorization: Bearer <token>' (401 otherwise).
The token is made on first use and kept in '<state dir>/mcp-token' (mode 0600, readable
by you only); --print-token prints it, --new-token replaces it (clients need the new one).
Only loopback addresses are bound. stdio needs no token: the client starts the server.

\b
Examples:
  memmw -w ~/agent mcp                       # stdio, for Claude Desktop / Cursor
  memmw -w ~/agent mcp --http --port 8765    # Streamable HTTP at http://127.0.0.1:8765/mcp
  memmw -w ~/agent mcp --print-token         # the bearer token for client configs
  memmw -w ~/agent mcp --principal alice     # serve as alice: her memory only

--principal ID serves one person (a principal per server, so per connection): the tools
read and write that person's own memory (memory/principals/ID/) and shared notes, never
the owner's or anyone else's. Without it the server answers as the owner.
"""


@command(name="mcp", help=HELP, short_help="Serve the memory tools over MCP.")
@click.option("--http", "use_http", is_flag=True, help="Streamable HTTP instead of stdio.")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Loopback address to bind with --http (127.0.0.1 or ::1).")
@click.option("--port", type=click.IntRange(1, 65535), default=8765, show_default=True,
              help="Port with --http.")
@click.option("--print-token", "print_token", is_flag=True,
              help="Print the HTTP bearer token (made if missing) to stdout and exit.")
@click.option("--new-token", "new_token", is_flag=True,
              help="Replace the HTTP bearer token with a new one (old clients get 401).")
@click.option("--principal", default=None, metavar="ID",
              help="Serve as this person (their private memory only); default the owner.")
@with_memory(one_shot=False)
def mcp(
    mem: Memory,
    use_http: bool,
    host: str,
    port: int,
    print_token: bool,
    new_token: bool,
    principal: str | None,
) -> int:
    """Run the server until the client disconnects or Ctrl-C."""
    from memmw.adapters import mcp as mcpserver
    from memmw.chat_type import check_principal_id
    from memmw.errors import ConfigError

    if principal is not None:
        try:
            principal = check_principal_id(principal)
        except ConfigError as exc:
            raise click.BadParameter(str(exc), param_hint="--principal") from None

    if print_token or new_token:
        token = mcpserver.http_token(mem.state_dir, rotate=new_token)
        info(f"{'new ' if new_token else ''}MCP HTTP token in "
             f"{mcpserver.token_path(mem.state_dir)}")
        if print_token:
            out(token)
            return EXIT_OK
        if not use_http:
            return EXIT_OK
    if use_http and host not in mcpserver.LOOPBACK:
        raise click.BadParameter(
            f"{host!r}: only a loopback address (127.0.0.1, ::1, localhost) is served; the "
            "tools read and write the workspace and the token travels unencrypted",
            param_hint="--host",
        )
    mcpserver.build_server(mem, principal=principal)  # fails early, with one line, when mcp is not installed
    token = mcpserver.http_token(mem.state_dir) if use_http else ""
    fresh = mcpserver.keep_fresh(mem)
    if use_http:
        url_host = f"[{host}]" if ":" in host else host
        info(f"memmw MCP server on http://{url_host}:{port}/mcp ({mem.workspace}; {fresh}); "
             f"bearer token in {mcpserver.token_path(mem.state_dir)} "
             "('memmw mcp --print-token')")
        mcpserver.serve_http(mem, token=token, host=host, port=port, principal=principal)
    else:
        import anyio  # only after build_server: the mcp extra brings it

        who = f"; principal {principal}" if principal else ""
        info(f"memmw MCP server on stdio ({mem.workspace}; {fresh}{who})")
        anyio.run(mcpserver.serve_stdio, mem, principal)
    return EXIT_OK
