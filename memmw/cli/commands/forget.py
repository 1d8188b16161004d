"""``memmw forget``: retract a memory entry (struck through in the Markdown, never deleted)."""

from __future__ import annotations

import click

from memmw.cli.common import (
    EXIT_OK,
    command,
    emit_json,
    info,
    out,
    report_error,
    settings,
    with_memory,
)
from memmw.engine.memory import Memory
from memmw.errors import MemmwError

HELP = """Retract a memory entry that is wrong or that should be forgotten.

The Markdown line is struck through and annotated with the day and the reason; it is
never deleted, so the history stays readable and 'git diff' shows what changed. The index
is updated at once: search and 'memmw facts' skip retracted entries.

Name the entry by its citation (as printed by 'memmw facts' or 'memmw search'), or by an
entity and a fact key (every value of that fact is retracted).

What was cited must still be there: with --expect TEXT the line must contain TEXT;
without it, the note must still begin with what the index read (appends since are
fine). A note edited since it was indexed is refused (nothing changes): pass --expect,
or search again and use the new citation. Other writers' lines, including lines a
program appends meanwhile, and every other byte of the note are kept as they were.

\b
Examples:
  memmw forget MEMORY.md#L12
  memmw forget memory/2026-05-01.md#L3 --reason "moved back to Berlin"
  memmw forget --entity "Alice Martin" --key city --reason "asked to forget"
  memmw forget MEMORY.md#L12 --expect "city: Berlin"
  memmw forget MEMORY.md#L12 --json        # the memory_forget tool payload

Exit codes: 0 retracted, 1 nothing to retract there (no such line, not a list entry,
already retracted, no such fact, the line changed since it was cited) or not a memory
file, 2 bad usage.
"""


@command(name="forget", help=HELP, short_help="Retract an entry (struck through, never deleted).")
@click.argument("citation", required=False, metavar="[CITATION]")
@click.option("--entity", metavar="NAME", help="The entity whose fact to retract (with --key).")
@click.option("--key", metavar="KEY", help="The fact key to retract (with --entity).")
@click.option("--reason", metavar="TEXT", default="", help="Why (written into the annotation).")
@click.option(
    "--expect",
    metavar="TEXT",
    default=None,
    help="The entry's text as you saw it; refused if the cited line no longer holds it.",
)
@with_memory(one_shot=True)
def forget(
    mem: Memory,
    citation: str | None,
    entity: str | None,
    key: str | None,
    reason: str,
    expect: str | None,
) -> int:
    """Retract the entry and print what changed."""
    if citation and (entity or key):
        raise click.UsageError("give either a CITATION or --entity with --key, not both")
    if not citation:
        if not entity and not key:
            raise click.UsageError(
                "say what to forget: memmw forget MEMORY.md#L12, or --entity NAME --key KEY"
            )
        if not entity:
            raise click.UsageError("--key needs --entity (the entity whose fact to retract)")
        if not key:
            raise click.UsageError("--entity needs --key (the fact to retract)")
    try:
        # One-shot: sync the keyword index only; 'memmw index' embeds the changed chunk.
        result = mem.forget(
            citation, entity=entity, key=key, reason=reason, expect=expect, embeddings="skip"
        )
    except MemmwError as exc:
        return report_error(exc)
    if settings().json:
        emit_json({"status": "ok", **result.to_payload()})
        return EXIT_OK
    for cite in result.retracted:
        out(f"retracted {cite}")
    info("(struck through in the Markdown and kept; search and facts now skip it)")
    return EXIT_OK
