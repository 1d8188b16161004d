"""``memmw graph``: write a self-contained HTML page drawing the knowledge graph."""

from __future__ import annotations

from pathlib import Path

import click

from memmw.cli.common import (
    EXIT_ERROR,
    EXIT_OK,
    command,
    emit_json,
    ensure_keyword_index,
    info,
    out,
    settings,
    with_memory,
)
from memmw.engine.memory import Memory

HELP = """Write one HTML page that draws the entities and relations derived from the notes.

The page is self-contained (it loads nothing from the network): open it in any browser.
Node size follows activation; it is searchable, and clicking an entity lists its facts
with their path#line citations. Add '#q=text' to the URL to search on load.

When files changed since the last index run, the keyword index is refreshed first.

\b
Examples:
  memmw graph --html graph.html
  memmw graph --html ~/Desktop/memory.html --json   # path and counts as one object

Exit codes: 0 written, 1 error (for example the file cannot be written), 2 bad usage.
"""


@command(name="graph", help=HELP, short_help="Write an HTML page drawing the knowledge graph.")
@click.option(
    "--html", "html_file", required=True, metavar="FILE",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Where to write the page (folders are created; an existing file is replaced).",
)
@with_memory(one_shot=True)
def graph(mem: Memory, html_file: Path) -> int:
    """Write the page and print its path."""
    if ensure_keyword_index(mem):
        info("(keyword index refreshed: files changed since the last index run)")
    try:
        written = mem.write_graph_html(html_file)
    except OSError as exc:
        why = f"{exc.strerror}: {exc.filename}" if exc.strerror and exc.filename else str(exc)
        out(f"memmw: error: cannot write the graph page {html_file}: {why}", err=True)
        return EXIT_ERROR
    if settings().json:
        snapshot = mem.graph_engine.graph()  # cached: the one the page was drawn from
        emit_json({
            "path": str(written.absolute()),
            "entities": len(snapshot.entities),
            "facts": len(snapshot.facts),
            "relations": len(snapshot.relations),
        })
    else:
        out(str(written))
    return EXIT_OK
