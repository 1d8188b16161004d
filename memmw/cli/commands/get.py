"""``memmw get``: the memory_get tool from the command line."""

from __future__ import annotations

from typing import Any

import click

from memmw.cli.common import EXIT_ERROR, EXIT_OK, command, emit_json, out, settings, with_memory
from memmw.engine.memory import Memory

HELP = """Print lines of a memory file (MEMORY.md, USER.md, memory/*.md or an extra path).

The window is bounded by read.max_lines and read.max_chars; a cut read ends with a
[truncated ...] notice saying where to continue. Only memory files can be read.

\b
Examples:
  memmw get MEMORY.md
  memmw get memory/2026-01-02.md --from 40 --lines 10
  memmw get USER.md --json          # the memory_get tool payload
  memmw get memory/team.md --namespace team   # a hit from a store.shared namespace

Exit codes: 0 ok, 1 not found, not a readable memory file, or --from past the file's end.
"""


@command(name="get", help=HELP, short_help="Print lines of a memory file.")
@click.argument("path")
@click.option("--from", "from_line", type=click.IntRange(min=1), metavar="LINE",
              help="First line to print (1-based) [default 1].")
@click.option("--lines", type=click.IntRange(min=1), metavar="N",
              help="Number of lines [default: read.max_lines].")
@click.option("--namespace", metavar="ID", default=None,
              help="Read the file of this store.shared namespace (a search hit's namespace).")
@with_memory(one_shot=True)
def get(
    mem: Memory, path: str, from_line: int | None, lines: int | None, namespace: str | None
) -> int:
    """Read the window and print it."""
    from memmw.agent.tools import get_tool_payload

    args: dict[str, Any] = {"path": path}
    if from_line is not None:
        args["from"] = from_line
    if lines is not None:
        args["lines"] = lines
    if namespace is not None:
        args["namespace"] = namespace
    payload = get_tool_payload(mem, args)
    failed = (
        bool(payload.get("error"))
        or payload.get("status") == "not_found"
        or bool(payload.get("pastEnd"))
    )
    if settings().json:
        emit_json(payload)
    elif payload.get("error"):
        out(f"memmw: error: {payload['error']}", err=True)
    elif payload.get("status") == "not_found":
        out(f"memmw: error: {payload['path']}: not found", err=True)
    elif payload.get("pastEnd"):
        total = int(payload.get("totalLines") or 0)
        out(f"memmw: error: {payload['path']} has {total} line{'' if total == 1 else 's'}; "
            f"--from {payload['from']} is past its end", err=True)
    else:
        out(payload["text"])
    return EXIT_ERROR if failed else EXIT_OK
