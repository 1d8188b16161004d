"""``memmw state list`` / ``memmw state prune``: the state folders under the user state root."""

from __future__ import annotations

from typing import Any

import click

from memmw.cli.common import EXIT_OK, command, emit_json, iso, out, settings
from memmw.engine.statefolders import StateFolder, list_state_folders, prune_state_folders

HELP = """List or prune the state folders under the user state root.

Each workspace indexed without --state-dir gets a folder of its own under
<user state root>/workspaces (Linux: ~/.local/state/memmw/workspaces), named after its
path. Moved and deleted workspaces leave theirs behind; 'list' shows them all, 'prune'
removes those whose workspace no longer exists.

\b
Examples:
  memmw state list
  memmw state list --json
  memmw state prune              # dry run: prints what it would remove
  memmw state prune --yes        # removes them
"""


def _human(size: int) -> str:
    value = float(size)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{size} B"  # pragma: no cover - the loop always returns


def _row(f: StateFolder) -> dict[str, Any]:
    return {
        "path": str(f.path),
        "workspace": f.workspace,
        "workspaceExists": f.workspace_exists,
        "orphan": f.orphan,
        "size": f.size,
        "lastSync": iso(f.last_sync),
        "agents": list(f.agents),
        "problems": list(f.problems),
        "transcripts": f.transcripts,
    }


@click.group(
    name="state",
    help=HELP,
    short_help="List or prune state folders (one per workspace).",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
def state() -> None:
    """The ``state`` command group."""


LIST_HELP = """List every state folder: its workspace, whether that still exists, size, last
sync and agents.

\b
Examples:
  memmw state list
  memmw state list --json

Exit codes: 0 ok, 1 error.
"""


@command(name="list", help=LIST_HELP, short_help="List the state folders.")
def list_cmd() -> int:
    """Print the state folders."""
    folders = list_state_folders()
    if settings().json:
        emit_json({"folders": [_row(f) for f in folders]})
        return EXIT_OK
    if not folders:
        out("No state folders.")
        return EXIT_OK
    for f in folders:
        where = f.workspace or "(no readable index)"
        mark = "" if f.workspace_exists or f.workspace is None else "  [workspace gone]"
        out(f"{f.path}")
        out(f"  workspace: {where}{mark}")
        out(
            f"  size: {_human(f.size)}  last sync: {iso(f.last_sync) or 'never'}"
            f"  agents: {', '.join(f.agents) or '-'}"
        )
        if f.transcripts:
            out(f"  session transcripts: {f.transcripts}")
        for problem in f.problems:
            out(f"  problem: {problem}")
    return EXIT_OK


PRUNE_HELP = """Remove the state folders whose workspace no longer exists.

Without --yes it only prints what it would remove. A folder whose index is in use (its
writer or embedding lock held) is skipped; a folder with no readable index is kept, and
so is one holding session transcripts unless --include-transcripts. Markdown files are
never touched. A workspace on an unmounted drive looks gone: check the dry run first.

\b
Examples:
  memmw state prune          # dry run
  memmw state prune --yes

Exit codes: 0 ok, 1 error.
"""


@command(name="prune", help=PRUNE_HELP, short_help="Remove state folders of vanished workspaces.")
@click.option("--yes", "-y", is_flag=True, help="Really remove them (default: dry run).")
@click.option("--dry-run", is_flag=True, help="Only print what would be removed (the default).")
@click.option(
    "--include-transcripts", is_flag=True,
    help="Also remove folders holding session transcripts (kept by default).",
)
def prune_cmd(yes: bool, dry_run: bool, include_transcripts: bool) -> int:
    """Prune orphaned state folders."""
    dry = dry_run or not yes
    report = prune_state_folders(dry_run=dry, include_transcripts=include_transcripts)
    if settings().json:
        emit_json({
            "dryRun": dry,
            "removed": [_row(f) for f in report.removed],
            "skipped": [{**_row(f), "reason": why} for f, why in report.skipped],
        })
        return EXIT_OK
    verb = "would remove" if dry else "removed"
    for f in report.removed:
        out(f"{verb}: {f.path} ({_human(f.size)}; workspace {f.workspace} is gone)")
    for f, why in report.skipped:
        out(f"skipped: {f.path} ({why})")
    if not report.removed and not report.skipped:
        out("Nothing to prune.")
    elif dry and report.removed:
        out("Dry run: pass --yes to remove them.", err=True)
    return EXIT_OK


state.add_command(list_cmd)
state.add_command(prune_cmd)
