"""``memmw backup``: the workspace's Markdown and its vectors in one checked archive."""

from __future__ import annotations

from pathlib import Path

import click

from memmw.cli.common import EXIT_OK, command, emit_json, out, settings, with_memory
from memmw.engine.memory import Memory

HELP = """Write one portable archive (tar.gz) of this workspace's memory.

It holds every file memmw treats as memory (MEMORY.md, USER.md, memory/**/*.md and
memmw.toml), the embedding vectors of their chunks (keyed by the sha256 of the chunk
text) and a manifest with the sha256 of every member, the memmw version and the provider
identity. The index is not archived: 'memmw restore' rebuilds it without embedding again.
The index is synced (and embedded) first unless --no-sync.

\b
Examples:
  memmw backup memory-2026-12-01.tar.gz
  memmw -w ~/agent backup /backups/agent.tar.gz --json

Exit codes: 0 written, 1 error, 2 bad usage.
"""


@command(name="backup", help=HELP, short_help="Write a checked archive of the memory.")
@click.argument("archive", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--no-sync", is_flag=True, help="Archive the index's vectors as they are.")
@with_memory(one_shot=True)
def backup(mem: Memory, archive: Path, no_sync: bool) -> int:
    """Write the archive."""
    report = mem.backup(archive, sync=not no_sync)
    if settings().json:
        emit_json({
            "path": str(report.path.absolute()),
            "files": report.files,
            "vectors": report.vectors,
            "missingVectors": report.missing_vectors,
            "size": report.size,
            "skipped": list(report.skipped),
        })
        return EXIT_OK
    out(
        f"Wrote {report.path}: {report.files} files, {report.vectors} vectors, "
        f"{report.size} bytes."
    )
    if report.missing_vectors:
        out(f"{report.missing_vectors} chunks had no vector yet; a restore embeds them.")
    for path in report.skipped:
        out(f"not archived (outside the workspace folder): {path}")
    return EXIT_OK
