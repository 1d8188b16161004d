"""``memmw facts``: the memory_facts tool (four-phase fact search) from the command line."""

from __future__ import annotations

from typing import Any

import click

from memmw.cli.common import (
    EXIT_DEGRADED,
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

HELP = """Look up facts and relations recorded in memory, each with its path#line citation.

Facts come from the notes themselves ('- key: value' lines under an entity heading,
'[[Entity]]' relations, aliases, people in prose bullets); nothing calls a model. The
search runs in four phases: entities named in the query and the facts it asks about, the
rest of those entities' facts and relations, then full-text facts and relations.

A newer dated value of the same fact supersedes the older one: only current values are
shown unless --history is given (or the query asks about the past); superseded ones are
marked. Retracted entries ('memmw forget') never appear.

When files changed since the last index run, the keyword index is refreshed first; it
never waits for embedding.

\b
Examples:
  memmw facts "where does Ali live"
  memmw facts "Alice city" --history       # superseded values too, marked
  memmw facts "Project Atlas" -n 20 --json # the memory_facts tool payload

Exit codes: 0 ok (also with no matches), 1 error, 4 degraded (the index could not be
read; see 'memmw status').
"""


@command(name="facts", help=HELP, short_help="Look up facts and relations (with citations).")
@click.argument("words", nargs=-1)
@click.option("--query", "query_opt", metavar="TEXT", help="The query (instead of WORDS).")
@click.option(
    "--max-results", "-n", type=click.IntRange(min=1), metavar="N",
    help="Most results to return [default: 10].",
)
@click.option(
    "--history", is_flag=True,
    help="Also show superseded (older) values, marked as such.",
)
@with_memory(one_shot=True)
def facts(
    mem: Memory,
    words: tuple[str, ...],
    query_opt: str | None,
    max_results: int | None,
    history: bool,
) -> int:
    """Run the fact search and print the results."""
    from memmw.agent.tools import facts_tool_payload

    query = query_opt if query_opt is not None else " ".join(words)
    if not query.strip():
        raise click.UsageError("a query is required: memmw facts 'who is Ali'")
    if ensure_keyword_index(mem):
        info("(keyword index refreshed: files changed since the last index run)")
    args: dict[str, Any] = {"query": query}
    if max_results is not None:
        args["maxResults"] = max_results
    if history:
        args["history"] = True
    # The tool payload itself, so --json prints exactly what memory_facts returns.
    payload = facts_tool_payload(mem, args, citations=True)
    if settings().json:
        emit_json(payload)
    else:
        _print_text(payload)
    if payload.get("error"):
        return EXIT_DEGRADED if payload.get("unavailable") else EXIT_ERROR
    return EXIT_OK


def _print_text(payload: dict[str, Any]) -> None:
    if payload.get("error"):
        out(f"memmw: facts failed: {payload['error']}", err=True)
        if payload.get("action"):
            out(f"  {payload['action']}", err=True)
        return
    results: list[dict[str, Any]] = payload["results"]
    if not results:
        info("No facts found.")
        return
    for item in results:
        state = "current" if item.get("current", True) else "superseded"
        notes = [n for n in (item.get("validFrom"), "expired" if item.get("expired") else None) if n]
        extra = f" ({', '.join(notes)})" if notes else ""
        out(f"{state:<10}  {item['text']}{extra}  {item.get('citation', '')}".rstrip())
