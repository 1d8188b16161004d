"""``memmw index``: sync the index with the workspace and embed what is pending."""

from __future__ import annotations

import time
from contextlib import ExitStack
from typing import Any

import click

from memmw.cli.common import (
    EXIT_BUSY,
    EXIT_DEGRADED,
    EXIT_NOTHING,
    EXIT_OK,
    command,
    emit_json,
    info,
    is_tty,
    out,
    settings,
    with_memory,
)
from memmw.config import Source
from memmw.engine.memory import EMBEDDING_BUSY, Memory
from memmw.types import SyncReport

HELP = """Bring the index up to date with the workspace, then embed pending chunks.

Unchanged files are skipped; a first run of a large workspace spends most of its time
embedding (chunks are keyword-searchable as soon as the file pass ends). On a terminal a
progress bar with an ETA is shown on stderr; elsewhere (a pipe, a log) plain lines such
as "Embedding: 480/1920 (25%)", one per quarter of each phase and at least one every 30 s,
then one line per phase with its elapsed time. Vectors found in the embedding cache (a
rebuild, a file renamed back) are counted apart from those the provider computed. When another memmw process is indexing the same index, this says so and
waits (or exits 3 with --no-wait); when another process is already embedding it, this
leaves the embedding to that process, says so and exits 3.

A provider that does not answer stops the embedding, not the command: a request that
timed out is retried only if the provider answered another one meanwhile, so against a
hung provider this returns after about one remote.timeout_s (60 s by default), prints
how many chunks are still pending (found by keyword meanwhile) and exits 4; run it again
to embed them.

\b
Examples:
  memmw index
  memmw index --force          # rebuild everything (searches keep working meanwhile)
  memmw index --no-embed       # keyword index only; vectors later
  memmw index --json           # one JSON object with counts and timings

Exit codes: 0 ok, 1 error, 3 busy, 4 degraded (files skipped, chunks left unembedded
because the provider failed, or the fallback provider took over), 5 nothing to index (no
memory file with any text: the message says which files it looked for).
"""


class _Bars:
    """click progress bars (ETA included) created on the first callback, when the total is
    known, and finished before the next line is printed."""

    def __init__(self, stack: ExitStack) -> None:
        self._stack = stack
        self._bars: dict[str, Any] = {}
        self._done: dict[str, int] = {}

    def update(self, name: str, label: str, done: int, total: int) -> None:
        bar = self._bars.get(name)
        if bar is None:
            if total <= 0:
                return
            bar = click.progressbar(length=total, label=label.ljust(15), show_eta=True, show_pos=True)
            bar.__enter__()
            self._stack.callback(self.finish, name)
            self._bars[name] = bar
            self._done[name] = 0
        step = done - self._done[name]
        if step > 0:
            bar.update(step)
            self._done[name] = done

    def finish(self, name: str) -> None:
        bar = self._bars.pop(name, None)
        if bar is not None:
            bar.__exit__(None, None, None)


class _Lines:
    """Plain progress lines for a log or a pipe (stderr is not a terminal): one each time a
    phase passes another quarter of its total, and at least one every ``every`` seconds."""

    def __init__(self, every: float = 30.0) -> None:
        self._every = every
        self._last: dict[str, tuple[int, float]] = {}  # name -> (quarter, monotonic time)

    def update(self, name: str, label: str, done: int, total: int) -> None:
        if total <= 0:
            return
        step = min(4, done * 4 // total)
        now = time.monotonic()
        last_step, last_time = self._last.get(name, (0, now))
        if name in self._last and step <= last_step and now - last_time < self._every:
            return
        if name not in self._last and step == 0:
            self._last[name] = (0, now)
            return
        self._last[name] = (step, now)
        info(f"{label}: {done}/{total} ({done * 100 // total}%)")


def _lock_busy(mem: Memory) -> bool:
    """True when another process holds the index's writer lock right now."""
    from memmw.errors import IndexBusyError

    try:
        with mem.store.writer_lock(timeout=0, what="probe"):
            return False
    except IndexBusyError:
        return True


def _pending(mem: Memory) -> int:
    with mem.store.read() as reader:
        return reader.pending_count()


def report_dict(report: SyncReport) -> dict[str, Any]:
    """A :class:`SyncReport` as camelCase JSON data."""
    return {
        "fullRebuild": report.full_rebuild,
        "reason": report.reason or None,
        "filesAdded": report.files_added,
        "filesChanged": report.files_changed,
        "filesRemoved": report.files_removed,
        "filesUnchanged": report.files_unchanged,
        "chunksIndexed": report.chunks_indexed,
        "chunksTotal": report.chunks_total,
        "issues": [i.to_dict() for i in report.issues],
        "seconds": round(report.seconds, 3),
    }


def nothing_to_index(mem: Memory, report: SyncReport) -> str:
    """Why an index run found nothing, naming the files memmw looks for."""
    from memmw.workspace.layout import MEMORY_DIR

    looked = f"MEMORY.md, USER.md and {MEMORY_DIR}/**/*.md"
    extras = [entry.path for entry in mem.config.extra_paths]
    if extras:
        looked += " and the extra paths " + ", ".join(extras)
    if Source.TRANSCRIPTS in mem.config.sources:
        looked += " and the session transcripts"
    files = report.files_added + report.files_changed + report.files_unchanged
    found = (f"{files} memory file{'' if files == 1 else 's'} found, all empty" if files
             else "no memory files found")
    return (
        f"nothing to index in {mem.workspace}: {found} (looked for {looked}). "
        f"Write a note to MEMORY.md or {MEMORY_DIR}/YYYY-MM-DD.md, or point --workspace at "
        "the folder that holds them."
    )


def _report_line(report: SyncReport, seconds: float) -> str:
    kind = f"full rebuild ({report.reason})" if report.full_rebuild else "incremental"
    return (
        f"Indexed: {kind}; {report.files_added} added, {report.files_changed} changed, "
        f"{report.files_removed} removed, {report.files_unchanged} unchanged; "
        f"{report.chunks_total} chunks; {seconds:.2f}s"
    )


@command(name="index", help=HELP, short_help="Sync the index with the files and embed.")
@click.option("--force", is_flag=True, help="Rebuild the whole index.")
@click.option("--no-embed", is_flag=True, help="Skip embedding; chunks stay keyword-only.")
@click.option("--no-wait", is_flag=True, help="Exit 3 at once if another process is indexing.")
@with_memory(one_shot=False)
def index(mem: Memory, force: bool, no_embed: bool, no_wait: bool) -> int:
    """Sync, embed, report."""
    s = settings()
    started = time.perf_counter()
    if s.verbose:
        info(f"workspace: {mem.workspace}")
        info(f"index:     {mem.store.location}")
        info(f"sources:   {', '.join(mem.config.sources)}; provider: {mem.config.provider}")
    waited = 0.0
    if _lock_busy(mem):
        if no_wait:
            out(f"memmw: busy: another memmw process is indexing {mem.store.location}", err=True)
            return EXIT_BUSY
        info(
            f"Waiting for another memmw process that is indexing or embedding {mem.store.location} "
            "(it holds the index's writer lock; Ctrl-C stops waiting)..."
        )
    bars_on = is_tty() and not s.quiet and not s.json
    with ExitStack() as stack:
        bars: _Bars | _Lines | None = (
            _Bars(stack) if bars_on else None if s.quiet or s.json else _Lines()
        )
        t0 = time.perf_counter()
        report = mem.sync(
            force=force,
            embeddings="skip",
            progress=(lambda d, t, _p: bars.update("files", "Indexing files", d, t))
            if bars
            else None,
        )
        if isinstance(bars, _Bars):
            bars.finish("files")
        waited = max(0.0, time.perf_counter() - t0 - report.seconds)
        sync_seconds = time.perf_counter() - t0
        if not s.json:
            info(_report_line(report, sync_seconds))
        embed_seconds = 0.0
        embedded = 0
        from_cache = 0
        embed_error: str | None = None
        if not no_embed and mem.provider is not None:
            t1 = time.perf_counter()
            todo = _pending(mem)
            if todo and not bars_on and not s.json:
                info(f"Embedding {todo} pending chunks with {mem.provider.id} "
                     f"({mem.provider.model})...")
            backfill = mem.embed_pending(
                progress=(lambda d, t: bars.update("embed", "Embedding", d, t))
                if bars
                else None
            )
            if isinstance(bars, _Bars):
                bars.finish("embed")
            embed_seconds = time.perf_counter() - t1
            if backfill is not None:
                embedded = backfill.embedded
                from_cache = backfill.from_cache
                embed_error = backfill.error
    vector = mem.status().details.get("vector", {})
    pending = int(vector.get("pending") or 0)
    provider = mem.provider
    total = time.perf_counter() - started
    fallback_from = getattr(provider, "fallback_from", None) or mem.selection.fallback_from
    # A skipped line leaves the rest of its file indexed: listed, but not degraded.
    skipped_files = [i for i in report.issues if i.line is None]
    degraded = bool(skipped_files) or bool(embed_error and pending) or bool(fallback_from)
    empty = report.chunks_total == 0
    if s.json:
        emit_json(
            {
                "sync": report_dict(report),
                "embedded": embedded,
                "fromCache": from_cache,
                "pendingVectors": pending,
                "embedError": embed_error,
                "fallbackFrom": fallback_from,
                "provider": provider.id if provider is not None else "none",
                "model": provider.model if provider is not None else "fts-only",
                "dbPath": mem.store.location,
                "waitedSeconds": round(waited, 3),
                "syncSeconds": round(sync_seconds, 3),
                "embedSeconds": round(embed_seconds, 3),
                "elapsedSeconds": round(total, 3),
                "nothingToIndex": nothing_to_index(mem, report) if empty else None,
            }
        )
    else:
        if (embedded or from_cache) and provider is not None:
            info(f"Vectors for {embedded + from_cache} chunks: {embedded} embedded with "
                 f"{provider.id} ({provider.model}), {from_cache} from the embedding cache; "
                 f"{embed_seconds:.2f}s")
        if pending:
            why = embed_error or ("--no-embed" if no_embed else "provider unavailable")
            resume = (
                " Run 'memmw index' again once the provider answers ('memmw status --deep'"
                " probes it); vectors already written are kept."
                if embed_error and embed_error != EMBEDDING_BUSY
                else ""
            )
            out(
                f"{pending} chunks have no vector yet ({why}); they are found by keyword "
                f"until an index run embeds them.{resume}",
                err=True,
            )
        if fallback_from and provider is not None:
            out(f"warning: {fallback_from} failed; the fallback {provider.id} embedded the index "
                "(see 'memmw status')", err=True)
        for issue in report.issues:
            where = issue.path if issue.line is None else f"{issue.path} line {issue.line}"
            out(f"  skipped {where}: {issue.reason}", err=True)
        info(f"Done in {total:.2f}s.")
        if empty:
            out(f"memmw: warning: {nothing_to_index(mem, report)}", err=True)
    if embed_error == EMBEDDING_BUSY and pending:
        return EXIT_BUSY  # the other process embeds them; nothing is wrong
    if degraded:
        return EXIT_DEGRADED
    return EXIT_NOTHING if empty else EXIT_OK
