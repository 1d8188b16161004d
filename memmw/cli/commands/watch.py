"""``memmw watch``: keep the index fresh while the memory files change."""

from __future__ import annotations

import logging
import signal
import threading

import click

from memmw.cli.common import EXIT_OK, command, info, with_memory
from memmw.engine.memory import Memory

HELP = """Sync, then keep the index (and its vectors) fresh as files change, until Ctrl-C.

Uses OS file watches (pip install 'memmw[watch]'); when the OS has none left it re-syncs
every --poll seconds instead (see 'memmw doctor' for the inotify limit). Pending vectors
are embedded in the background while it runs.

\b
Examples:
  memmw watch
  memmw -w ~/agent watch --poll 10
"""


@command(name="watch", help=HELP, short_help="Keep the index fresh as files change.")
@click.option("--poll", type=click.FloatRange(min=0.5), default=5.0, show_default=True,
              metavar="SECONDS", help="Re-sync interval when the OS has no file watches left.")
@with_memory(one_shot=False)
def watch(mem: Memory, poll: float) -> int:
    """Watch until interrupted."""
    from memmw.cli.commands.index import _report_line

    logging.getLogger("memmw.engine.freshness").setLevel(logging.INFO)  # one line per sync
    report = mem.sync(embeddings="background")
    info(_report_line(report, report.seconds))
    state = mem.start_watching()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if state == "watching":
        ms = mem.config.sync.watch_debounce_ms
        info(f"Watching {mem.workspace} (debounce {ms} ms). Press Ctrl-C to stop.")
    else:
        info(f"File watching unavailable ({state}); re-syncing every {poll:g}s.")
    try:
        while not stop.wait(poll):
            if mem.watcher_state != "watching":
                mem.sync_in_background()  # no OS watches: poll instead
    except KeyboardInterrupt:
        pass
    mem.stop_watching()
    mem.wait_for_sync(timeout=30)
    info("Stopped watching.")
    return EXIT_OK
