"""``memmw principals list`` / ``memmw principals delete ID``: each person's private memory."""

from __future__ import annotations

import click

from memmw.cli.common import (
    EXIT_OK,
    command,
    emit_json,
    info,
    iso,
    out,
    report_error,
    settings,
    with_memory,
)
from memmw.engine.memory import Memory
from memmw.engine.principals import delete_principal, list_principals
from memmw.errors import ConfigError, MemmwError

HELP = """List principals (the people and groups an agent keeps private memory for) or
delete one principal's memory.

A principal is who a direct session is with when it is not the owner: a DM's sender,
named by the host or taken from the session key with dm_scope = "per-peer". Its memory is
the folder memory/principals/<id>/ (USER.md, MEMORY.md, daily notes and /new archives),
its session transcripts and the index rows derived from them.

\b
Examples:
  memmw principals list
  memmw principals list --json
  memmw principals delete telegram-7          # dry run: prints what it would remove
  memmw principals delete telegram-7 --yes    # removes files, transcripts and index rows
"""

LIST_HELP = """List every principal: files, size, indexed files, chunks, facts, transcripts and
the last write.

\b
Examples:
  memmw principals list
  memmw principals list --json

Exit codes: 0 ok, 1 error.
"""

DELETE_HELP = """Delete one principal's memory: the folder memory/principals/<ID>/ (links are
removed, never what they point to), the transcripts of its sessions and every index row
derived from them (the index is synced and checked afterwards).

Without --yes it only prints what it would remove. The owner's files, shared notes and
other principals' memory are never touched.

\b
Examples:
  memmw principals delete telegram-7          # dry run
  memmw principals delete telegram-7 --yes

Exit codes: 0 ok (deleted, or the dry run), 1 error (index rows left), 2 bad usage (a bad id).
"""


@click.group(
    name="principals",
    help=HELP,
    short_help="List principals or delete one principal's memory.",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
def principals() -> None:
    """The ``principals`` command group."""


@command(name="list", help=LIST_HELP, short_help="List principals and their memory.")
@with_memory(one_shot=True)
def list_cmd(mem: Memory) -> int:
    """Print the principals."""
    found = list_principals(mem)
    if settings().json:
        emit_json({"principals": [p.to_payload() for p in found]})
        return EXIT_OK
    if not found:
        out("No principals (every direct session is the owner's).")
        return EXIT_OK
    for p in found:
        out(
            f"{p.principal}: {p.files} files ({p.bytes} B), {p.indexed_files} indexed, "
            f"{p.chunks} chunks, {p.facts} facts, {p.transcripts} transcripts, "
            f"last write {iso(p.last_write) or 'never'}"
        )
    return EXIT_OK


@command(name="delete", help=DELETE_HELP, short_help="Delete one principal's memory.")
@click.argument("principal", metavar="ID")
@click.option("--yes", "-y", is_flag=True, help="Really delete (default: dry run).")
@click.option("--dry-run", is_flag=True, help="Only print what would be removed (the default).")
@with_memory(one_shot=True)
def delete_cmd(mem: Memory, principal: str, yes: bool, dry_run: bool) -> int:
    """Delete the principal's files, transcripts and index rows."""
    dry = dry_run or not yes
    try:
        report = delete_principal(mem, principal, dry_run=dry)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="ID") from None
    except MemmwError as exc:
        return report_error(exc)
    if settings().json:
        emit_json({"status": "ok", **report.to_payload()})
        return EXIT_OK
    verb = "would remove" if dry else "removed"
    for rel in report.files:
        out(f"{verb}: {rel}")
    for name in report.transcripts:
        out(f"{verb}: transcript {name}")
    if not report.files and not report.transcripts and not report.remaining:
        out(f"Nothing stored for principal {report.principal}.")
    elif dry:
        info(f"{report.remaining} index rows (files, chunks, facts) would go too; "
             "pass --yes to delete")
    else:
        info(f"principal {report.principal}: deleted; 0 index rows left")
    return EXIT_OK


principals.add_command(list_cmd)
principals.add_command(delete_cmd)
