"""``memmw consolidate``: daily notes flow up into MEMORY.md and active-context.md."""

from __future__ import annotations

import datetime as dt

import click

from memmw.cli.common import (
    EXIT_BUSY,
    EXIT_ERROR,
    EXIT_OK,
    command,
    emit_json,
    info,
    out,
    settings,
    with_memory,
)
from memmw.engine.memory import Memory

HELP = """Consolidate memory: promote what daily notes and archives keep being recalled for
into MEMORY.md and active-context.md, latest value first, history kept.

Candidates need no model: entries of dated notes recalled often (searches that showed
them are in the telemetry log), by distinct queries, lately, holding a fact or a
decision, from a trusted note. --dry-run lists every recalled entry with the reasons it
is or is not a candidate.

A run asks the configured chat model ([consolidation] provider/model/base_url in
memmw.toml: openai, gemini, openai-compatible, llama-cpp) for edits: add, update (the
newer value leads the line, with its source; the older value stays on the line, struck
through and dated), supersede (struck through with a cited reason), merge.
Before anything is written six gates must pass; a failed gate writes nothing and is
named: keep (every prior entry kept or struck through with a cited reason, at most
max_change_fraction changed), citations (every cited path#Lnn exists and holds what was
quoted), budget (fits the bootstrap budget), privacy (no private text into a file others
read), provenance (nothing group-written or imported promoted), unchanged (nobody edited
the file meanwhile). The files' previous bytes are kept in the state folder: --undo
restores them exactly (refused if a file was edited since).

\b
Examples:
  memmw consolidate --dry-run          # candidates and why, no model, nothing written
  memmw consolidate --dry-run --all    # also entries that were never recalled
  memmw consolidate                    # run with the configured model
  memmw consolidate --undo             # put the files back as they were
  memmw consolidate --json             # the report as JSON

Exit codes: 0 applied, dry run, undone or nothing to do; 1 refused by a gate (named) or
an error; 3 another consolidation of this workspace is running.
"""


def _age(ts: float) -> str:
    if not ts:
        return "never"
    return dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M")


@command(name="consolidate", help=HELP, short_help="Promote recalled daily notes into MEMORY.md.")
@click.option("--dry-run", is_flag=True, help="Only list candidates and why; no model, no write.")
@click.option(
    "--all", "show_all", is_flag=True, help="List every entry, never-recalled ones too."
)
@click.option(
    "--limit", type=click.IntRange(0), default=50, show_default=True,
    help="Judged entries listed (best first); every entry is counted.",
)
@click.option("--undo", is_flag=True, help="Restore the files the newest run changed.")
@with_memory(one_shot=True)
def consolidate(mem: Memory, dry_run: bool, show_all: bool, limit: int, undo: bool) -> int:
    """Run, explain or undo a consolidation."""
    from memmw.consolidation import chat_model
    from memmw.consolidation import consolidate as run
    from memmw.consolidation import undo as undo_run

    if undo and dry_run:
        raise click.UsageError("--undo and --dry-run do not go together")
    if undo:
        back = undo_run(mem, sync=True)
        if settings().json:
            emit_json(back.to_dict())
        elif back.status == "undone":
            out(f"undone run {back.run_id}: restored {', '.join(back.restored)}")
        else:
            out(f"memmw: {back.status}: {back.detail}", err=back.status != "nothing")
        return {"undone": EXIT_OK, "nothing": EXIT_OK, "busy": EXIT_BUSY}.get(back.status, EXIT_ERROR)
    model = None if dry_run else chat_model(mem.config.consolidation)
    if model is None and not dry_run:
        raise click.UsageError(
            "no chat model configured: set [consolidation] provider (openai, gemini, "
            "openai-compatible, llama-cpp) in memmw.toml, or use --dry-run"
        )
    report = run(mem, model, dry_run=dry_run, include_unrecalled=show_all)
    shown = None if show_all else limit
    if settings().json:
        emit_json(report.to_dict(limit=shown))
    else:
        _print(report, shown)
    if report.status == "busy":
        return EXIT_BUSY
    return EXIT_ERROR if report.status == "refused" else EXIT_OK


def _print(report: object, limit: int | None) -> None:
    from memmw.consolidation import ConsolidationReport

    assert isinstance(report, ConsolidationReport)
    found = report.candidates
    if found is not None:
        cands = found.candidates
        out(
            f"{len(cands)} candidate(s) among {len(found.entries)} recalled entries of "
            f"{found.notes} dated notes ({found.never_recalled} entries never recalled)"
        )
        if found.failed:
            out("not candidates because: " + ", ".join(
                f"{name} {count}" for name, count in found.failed.items()
            ))
        listed = found.entries if limit is None else found.entries[:limit]
        if len(listed) < len(found.entries):
            out(f"listing the best {len(listed)} (--all or --limit N for more)")
        for c in listed:
            mark = "CANDIDATE" if c.candidate else "not"
            out(f"\n{mark:9} {c.citation}  score {c.score:.2f}  last recall {_age(c.last_recall)}")
            out(f"          {c.text}")
            for reason in c.reasons:
                out(f"          {reason}")
    if report.status == "applied":
        out(f"\napplied (run {report.run_id}; undo with: memmw consolidate --undo)")
        for name, lines in report.changes.items():
            for line in lines:
                out(f"  {name} {line}")
    elif report.status == "refused":
        out(f"\nrefused by gate '{report.gate}': {report.detail} (nothing written)", err=True)
    elif report.status in ("busy", "nothing"):
        out(f"\n{report.status}: {report.detail}")
    else:
        info("(dry run: nothing written)")
