"""``memmw search``: the memory_search tool from the command line."""

from __future__ import annotations

from typing import Any

import click

from memmw.agent.tools import CORPORA
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
from memmw.config import Source
from memmw.engine.memory import Memory
from memmw.types import KEYWORD_ONLY

HELP = """Search memory; prints the best matching snippets with path:line citations.

Returns as soon as the results are ready: it never waits for embedding. When files
changed since the last index run, the keyword index is refreshed first (a fraction of a
second); chunks without a vector yet are found by keyword only (run 'memmw index').

\b
Scores: 0..1 on one scale in every mode, so --min-score means the same keyword-only
and hybrid: keyword evidence (tanh of the boosted BM25 score) and vector evidence (the
cosine calibrated against the corpus) combine as 1-(1-k)(1-v), after decay and
importance. A match only the keyword leg finds scores the same in both modes. Results
come in ranking order (hybrid: the fusion's), so a later one can score higher.
--min-score given explicitly keeps only results scoring at least that value (0 also
shows scores that print as 0.000). With the default threshold (query.min_score, 0.35)
weaker keyword matches still fill empty slots, and the best semantic match is never
dropped for a lower-scoring one.

\b
Examples:
  memmw search "does the user have food allergies"
  memmw search gateway port --max-results 3
  memmw search "deploy steps" --min-score 0.5 --json
  memmw search "what did we decide" --corpus all     # notes and session transcripts

Exit codes: 0 ok (also with no matches), 1 error, 4 degraded (the embedding provider
failed and results are keyword-only, or the fallback provider answered).
"""


@command(name="search", help=HELP, short_help="Search memory (snippets with citations).")
@click.argument("words", nargs=-1)
@click.option("--query", "query_opt", metavar="TEXT", help="The query (instead of WORDS).")
@click.option(
    "--max-results", "-n", type=click.IntRange(min=1), metavar="N",
    help="Most results to return [default: query.max_results, 6].",
)
@click.option(
    "--min-score", type=click.FloatRange(0.0, 1.0), metavar="0..1",
    help="Keep only results scoring at least this (strict; see Scores above).",
)
@click.option(
    "--corpus", type=click.Choice(list(CORPORA)), default=Source.MEMORY.value,
    show_default=True, help="Notes, session transcripts, or both.",
)
@with_memory(one_shot=True)
def search(
    mem: Memory,
    words: tuple[str, ...],
    query_opt: str | None,
    max_results: int | None,
    min_score: float | None,
    corpus: str,
) -> int:
    """Run the search and print the results."""
    from memmw.agent.tools import search_tool_payload

    query = query_opt if query_opt is not None else " ".join(words)
    if not query.strip():
        raise click.UsageError("a query is required: memmw search 'what to look for'")
    if ensure_keyword_index(mem):
        info("(keyword index refreshed: files changed since the last index run)")
    args: dict[str, Any] = {"query": query, "corpus": corpus}
    if max_results is not None:
        args["maxResults"] = max_results
    if min_score is not None:
        args["minScore"] = min_score
    payload = search_tool_payload(mem, args, citations=True)
    vectors_failed = _keyword_only_why(mem, payload)
    if settings().json:
        emit_json(payload)
    else:
        _print_text(payload)
    if payload.get("error") and not payload.get("results"):
        return EXIT_ERROR  # no answer at all (a bad argument, or search unavailable)
    if payload.get("warning") or payload.get("fallback") or vectors_failed:
        return EXIT_DEGRADED
    return EXIT_OK


def _keyword_only_why(mem: Memory, payload: dict[str, Any]) -> bool:
    """Say why a search with a provider answered by keyword only; True when it is degraded.

    Judged like ``memmw status`` (:func:`vector_problems`): a failed embedding run is a
    degraded answer (exit 4) with status's reason and fix, never "not ready yet".
    """
    from memmw.cli.commands.status import vector_problems

    if payload.get("mode") != KEYWORD_ONLY or payload.get("provider") in (None, "none"):
        return False
    if payload.get("warning") or payload.get("error"):
        return False  # the payload already says why (printed by _print_text)
    problems, pending = vector_problems(mem)
    if problems and not settings().json:
        for problem in problems:
            out(f"warning: keyword-only results: {problem['what']}: {problem['why']}", err=True)
            out(f"  fix: {problem['fix']}", err=True)
    elif pending and not settings().json:
        info(f"note: keyword-only results ({pending} chunks have no {payload['provider']} "
             "vector yet; 'memmw index' embeds them)")
    return bool(problems)


def _print_text(payload: dict[str, Any]) -> None:
    if payload.get("error"):
        out(f"memmw: search failed: {payload['error']}", err=True)
        if payload.get("action"):
            out(f"  {payload['action']}", err=True)
        return
    results: list[dict[str, Any]] = payload["results"]
    if payload.get("warning"):
        out(f"warning: {payload['warning']}", err=True)
    fallback = payload.get("fallback")
    if isinstance(fallback, dict) and fallback.get("from"):
        out(f"warning: {fallback['from']} failed; the fallback {payload.get('provider')} "
            f"answered ({fallback.get('reason')})", err=True)
    if not results:
        info("No matches.")
        return
    for item in results:
        out(f"{item['score']:.3f}  {item['path']}:{item['startLine']}-{item['endLine']}")
        out(item["snippet"])
        out()
