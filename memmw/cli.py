"""The ``memmw`` command line: status, index, search, get, reset."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from memmw import __version__
from memmw.config import MemoryConfig
from memmw.errors import MemmwError
from memmw.memory import Memory
from memmw.types import SyncReport

Command = Callable[[argparse.Namespace, Memory], int]


def _out(text: str = "", stream: TextIO | None = None) -> None:
    print(text, file=stream or sys.stdout)


def _progress_bar(stream: TextIO) -> Callable[[int, int, str], None]:
    def show(done: int, total: int, path: str) -> None:
        width = 30
        filled = width * done // total if total else width
        label = (path[-40:] if path else "done").ljust(40)
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {label}")
        if total and done >= total:
            stream.write("\n")
        stream.flush()

    return show


def _report_line(report: SyncReport) -> str:
    kind = f"full rebuild ({report.reason})" if report.full_rebuild else "incremental"
    return (
        f"Indexed: {kind}; {report.files_added} added, {report.files_changed} changed, "
        f"{report.files_removed} removed, {report.files_unchanged} unchanged; "
        f"{report.chunks_total} chunks in {report.seconds:.2f}s"
    )


def cmd_index(args: argparse.Namespace, mem: Memory) -> int:
    if args.verbose:
        _out(f"workspace: {mem.workspace}")
        _out(f"index:     {mem.db_path}")
        _out(f"provider:  {mem.config.provider}  sources: {', '.join(mem.config.sources)}")
    tty = sys.stderr.isatty()
    progress = _progress_bar(sys.stderr) if tty else None
    started = time.perf_counter()

    def embed_progress(done: int, total: int) -> None:
        rate = done / max(time.perf_counter() - started, 1e-9)
        _progress_bar(sys.stderr)(done, total, f"embedding, {rate:.1f} chunks/s")

    report = mem.sync(
        force=args.force, progress=progress, embed_progress=embed_progress if tty else None
    )
    _out(_report_line(report))
    if report.embedded:
        provider = mem.provider
        name = f"{provider.id} ({provider.model})" if provider is not None else "no provider"
        _out(f"Embedded {report.embedded} chunks with {name}.")
    pending = mem.status().details.get("vector", {})
    if pending.get("pending"):
        _out(
            f"{pending['pending']} chunks are not embedded yet "
            f"({pending.get('lastError') or 'provider unavailable'}); they stay "
            "keyword-searchable and are embedded on the next index run."
        )
    for issue in report.issues:
        _out(f"  skipped {issue.path}: {issue.reason}", sys.stderr)
    return 0


def cmd_status(args: argparse.Namespace, mem: Memory) -> int:
    status = mem.status(deep=args.deep)
    data = status.to_dict()
    if args.json:
        _out(json.dumps([data], indent=2, default=str))
        return 0
    _out(f"Agent:     {status.agent_id}")
    _out(f"Workspace: {status.workspace}")
    _out(f"Index:     {status.db_path}")
    _out(f"Provider:  {status.provider} (model {status.model}); mode {status.mode}")
    _out(f"Sources:   {', '.join(status.sources)}")
    _out(f"Files:     {status.files}   Chunks: {status.chunks}   Dirty: {status.dirty}")
    for source, counts in sorted(status.source_counts.items()):
        _out(f"  {source}: {counts['files']} files, {counts['chunks']} chunks")
    for key in ("fts", "keywordMatrix", "vector", "embedding", "cache", "watcher"):
        if key in data and isinstance(data[key], dict):
            parts = ", ".join(f"{k}={v}" for k, v in data[key].items())
            _out(f"{key}: {parts}")
    for issue in status.issues:
        _out(f"  issue {issue.path}: {issue.reason}")
    return 0


def cmd_search(args: argparse.Namespace, mem: Memory) -> int:
    query = args.query_opt if args.query_opt is not None else args.query
    if not query or not query.strip():
        raise MemmwError("a query is required: memmw search 'what to look for'")
    if args.max_results is not None and args.max_results < 1:
        raise MemmwError("--max-results must be a positive integer")
    if mem.config.sync.on_search and mem.dirty:
        # A one-shot process has no later search to profit from a background sync.
        mem.sync(embeddings="background")
    payload = mem.search_payload(
        query, max_results=args.max_results, min_score=args.min_score, citations=True
    )
    if args.json:
        _out(json.dumps(payload, indent=2, ensure_ascii=False))
        return 0
    results: list[dict[str, Any]] = payload["results"]
    if not results:
        _out("No matches.")
        return 0
    for item in results:
        _out(f"{item['score']:.3f} {item['path']}:{item['startLine']}-{item['endLine']}")
        _out(item["snippet"])
        _out()
    return 0


def cmd_get(args: argparse.Namespace, mem: Memory) -> int:
    result = mem.get(args.path, from_line=args.from_line, lines=args.lines)
    if args.json:
        _out(json.dumps(result.to_payload(), indent=2, ensure_ascii=False))
        return 0
    if result.status == "not_found":
        _out(f"{result.path}: not found", sys.stderr)
        return 1
    _out(result.text)
    return 0


def cmd_reset(args: argparse.Namespace, mem: Memory) -> int:
    if not args.yes:
        if not sys.stdin.isatty():
            raise MemmwError("reset deletes the derived index; pass --yes to confirm")
        answer = input(f"Delete the index {mem.db_path}? Memory files are kept. [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            _out("Cancelled.")
            return 1
    mem.reset()
    _out(f"Index deleted: {mem.db_path}. Markdown files untouched; run 'memmw index' to rebuild.")
    return 0


def cmd_watch(args: argparse.Namespace, mem: Memory) -> int:
    """Sync, then keep the index fresh while the files change, until Ctrl-C."""
    import signal
    import threading

    logging.getLogger("memmw.freshness").setLevel(logging.INFO)  # one line per sync
    _out(_report_line(mem.sync()))
    state = mem.start_watching()
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    if state == "watching":
        ms = mem.config.sync.watch_debounce_ms
        _out(f"Watching {mem.workspace} (debounce {ms} ms). Press Ctrl-C to stop.")
    else:
        _out(f"File watching unavailable ({state}); re-syncing every {args.poll:g}s.", sys.stderr)
    try:
        while not stop.wait(args.poll):
            if mem.watcher_state != "watching":
                mem.sync_in_background()  # no OS watches: poll instead
    except KeyboardInterrupt:
        pass
    mem.stop_watching()
    mem.wait_for_sync(timeout=30)
    _out("Stopped watching.")
    return 0


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    parser = argparse.ArgumentParser(
        prog="memmw",
        description="Long-term memory for AI agents: index and search Markdown memory.",
    )
    parser.add_argument("--version", action="version", version=f"memmw {__version__}")
    parser.add_argument(
        "--workspace", "-w", help="workspace folder (default $MEMMW_WORKSPACE or .)"
    )
    parser.add_argument(
        "--state-dir", help="derived state folder (default $MEMMW_STATE_DIR or ~/.memmw)"
    )
    parser.add_argument("--agent", default="main", help="agent id (names the index file)")
    parser.add_argument("--config", help="TOML config file (default <workspace>/memmw.toml)")
    parser.add_argument("--log-level", default="WARNING", help="DEBUG, INFO, WARNING, ERROR")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("status", help="show the index state")
    p.add_argument("--deep", action="store_true", help="probe the search backends")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("index", help="sync the index with the workspace")
    p.add_argument("--force", action="store_true", help="rebuild the whole index")
    p.add_argument("--verbose", "-v", action="store_true")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("search", help="search memory")
    p.add_argument("query", nargs="?")
    p.add_argument("--query", dest="query_opt", help="query (wins over the positional one)")
    p.add_argument("--max-results", type=int)
    p.add_argument("--min-score", type=float)
    p.add_argument("--json", action="store_true", help="print the memory_search tool payload")
    p.set_defaults(func=cmd_search)

    p = sub.add_parser("get", help="read lines of a memory file")
    p.add_argument("path")
    p.add_argument("--from", dest="from_line", type=int)
    p.add_argument("--lines", type=int)
    p.add_argument("--json", action="store_true", help="print the memory_get tool payload")
    p.set_defaults(func=cmd_get)

    p = sub.add_parser("reset", help="delete the derived index (never Markdown files)")
    p.add_argument("--yes", "-y", action="store_true")
    p.set_defaults(func=cmd_reset)

    p = sub.add_parser("watch", help="keep the index fresh as files change (Ctrl-C stops)")
    p.add_argument(
        "--poll", type=float, default=5.0,
        help="seconds between re-syncs when the OS has no file watches left (default 5)",
    )
    p.set_defaults(func=cmd_watch)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (errors print one line, no traceback)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(levelname)s %(name)s: %(message)s",
    )
    try:
        config = (
            MemoryConfig.load(workspace=args.workspace or None, config_file=args.config)
            if args.config or args.workspace
            else None
        )
        with Memory(
            workspace=args.workspace,
            state_dir=args.state_dir,
            agent_id=args.agent,
            config=config,
            config_file=args.config,
        ) as mem:
            code: int = args.func(args, mem)
            return code
    except KeyboardInterrupt:
        _out("interrupted", sys.stderr)
        return 130
    except (MemmwError, OSError) as exc:
        _out(f"memmw: error: {exc}", sys.stderr)
        return 1
    except Exception as exc:  # a bug: one line unless debugging
        if logging.getLogger().isEnabledFor(logging.DEBUG):
            raise
        _out(f"memmw: internal error: {type(exc).__name__}: {exc} (rerun with --log-level DEBUG)", sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
