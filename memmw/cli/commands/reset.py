"""``memmw reset``: delete the derived index (never a Markdown file)."""

from __future__ import annotations

import sys

import click

from memmw.cli.common import EXIT_ERROR, EXIT_OK, command, emit_json, out, settings, with_memory
from memmw.engine.memory import Memory

HELP = """Delete this workspace's derived index; the Markdown files are never touched.

The next 'memmw index' (or search) rebuilds it from the files. Asks for confirmation on a
terminal; elsewhere pass --yes.

\b
Examples:
  memmw reset            # asks first
  memmw reset --yes      # scripts
"""


@command(name="reset", help=HELP, short_help="Delete the derived index (files are kept).")
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
@with_memory(one_shot=True)
def reset(mem: Memory, yes: bool) -> int:
    """Delete the index after confirmation."""
    path = mem.store.location
    as_json = settings().json
    if not mem.store.exists():
        if as_json:
            emit_json({"deleted": False, "dbPath": path, "reason": "no index"})
        else:
            out(f"No index at {path}; nothing to delete.")
        return EXIT_OK
    if not yes:
        if not sys.stdin.isatty():
            raise click.UsageError("reset deletes the derived index; pass --yes to confirm")
        if not click.confirm(f"Delete the index {path}? Memory files are kept.", default=False):
            out("Cancelled.")
            return EXIT_ERROR
    mem.reset()
    if as_json:
        emit_json({"deleted": True, "dbPath": path})
    else:
        out(f"Index deleted: {path}. Markdown files untouched; 'memmw index' rebuilds it.")
    return EXIT_OK
