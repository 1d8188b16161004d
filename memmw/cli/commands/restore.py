"""``memmw restore``: a backup archive back into a workspace, indexed without re-embedding."""

from __future__ import annotations

from pathlib import Path

import click

from memmw.cli.common import EXIT_OK, command, emit_json, out, settings
from memmw.config import MemoryConfig
from memmw.engine.memory import Memory

HELP = """Restore a 'memmw backup' archive into --workspace DIR and index it.

The whole archive is checked first (sha256 of every member against its manifest): a
damaged or altered archive is refused and nothing is written. DIR must be empty (or
missing) unless --force, which replaces files of the same name and keeps the others.
The archived vectors go into the new index's embedding cache, so nothing is embedded
again when the provider is the one the backup was made with.

\b
Examples:
  memmw restore memory.tar.gz --workspace ~/agent
  memmw restore memory.tar.gz --workspace ~/agent --state-dir ~/agent-state --force

Exit codes: 0 restored, 1 error (a damaged archive, a non-empty target), 2 bad usage.
"""


@command(name="restore", help=HELP, short_help="Restore a backup archive and index it.")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Write into a non-empty workspace folder.")
def restore(archive: Path, force: bool) -> int:
    """Restore the archive."""
    s = settings()
    if not s.workspace:
        raise click.UsageError("restore needs --workspace DIR (the folder to restore into)")
    config = MemoryConfig.load(config_file=s.config) if s.config else None
    report = Memory.restore(
        archive,
        Path(s.workspace).expanduser(),
        s.state_dir,
        force=force,
        agent_id=s.agent or "main",
        config=config,
    )
    if s.json:
        emit_json({
            "workspace": str(report.workspace),
            "files": report.files,
            "vectorsImported": report.vectors_imported,
            "embedded": report.embedded,
            "fromCache": report.from_cache,
            "warning": report.warning,
        })
        return EXIT_OK
    out(
        f"Restored {report.files} files into {report.workspace}; {report.vectors_imported} "
        f"vectors imported, {report.from_cache} chunks from them, {report.embedded} embedded."
    )
    if report.warning:
        out(f"warning: {report.warning}")
    return EXIT_OK
