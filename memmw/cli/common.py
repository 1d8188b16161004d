"""What every command shares: global options, exit codes, output helpers, opening memory."""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from memmw.config import Source
from memmw.redaction import RedactingFilter

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

F = TypeVar("F", bound=Callable[..., Any])

#: Exit codes (documented in ``memmw --help`` and the README).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_BUSY = 3
EXIT_DEGRADED = 4
EXIT_NOTHING = 5
EXIT_INTERRUPTED = 130

EXIT_CODES_HELP = (
    "Exit codes: 0 ok; 1 error; 2 bad usage; 3 busy (another process holds the index and "
    "--no-wait was given, or the wait timed out); 4 degraded (the answer was given, but "
    "something needs attention: a provider failed, a fallback is in use, files were "
    "skipped; see 'memmw status'); 5 nothing to index (index found no memory file with text); "
    "130 interrupted."
)

ENV_HELP = (
    "Environment: MEMMW_WORKSPACE (workspace folder), MEMMW_STATE_DIR (state folder), "
    "MEMMW_AGENT (agent id), MEMMW_CONFIG (TOML config file), MEMMW_LOG_LEVEL (log level), "
    "MEMMW__<SECTION>__<KEY> (any config setting, e.g. MEMMW__QUERY__MAX_RESULTS=8 or "
    "MEMMW__PROVIDER=none), MEMMW_PROVIDER / MEMMW_MODEL / MEMMW_FALLBACK (short forms), "
    "OPENAI_API_KEY, GEMINI_API_KEY / GOOGLE_API_KEY (remote embedding providers), "
    "XDG_STATE_HOME (Linux: where the default state folder lives), "
    "_MEMMW_COMPLETE (shell completion, see 'memmw completion')."
)

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


@dataclasses.dataclass
class Settings:
    """Global options, merged from before and after the subcommand (the later wins)."""

    workspace: str | None = None
    state_dir: str | None = None
    agent: str | None = None
    config: str | None = None
    json: bool = False
    quiet: bool = False
    verbose: bool = False
    log_level: str | None = None

    def configure_logging(self) -> None:
        """Set the root log level from --log-level, else --verbose/--quiet."""
        level = self.log_level or ("INFO" if self.verbose else "ERROR" if self.quiet else "WARNING")
        root = logging.getLogger()
        if not root.handlers:
            handler = logging.StreamHandler(sys.stderr)
            handler.setFormatter(logging.Formatter("memmw: %(levelname)s %(name)s: %(message)s"))
            handler.addFilter(RedactingFilter())
            root.addHandler(handler)
        root.setLevel(getattr(logging, level))


def settings(ctx: click.Context | None = None) -> Settings:
    """The :class:`Settings` of the current invocation."""
    root = (ctx or click.get_current_context()).find_root()
    if not isinstance(root.obj, Settings):
        root.obj = Settings()
    return root.obj


def _store(attr: str) -> Callable[[click.Context, click.Parameter, Any], None]:
    def callback(ctx: click.Context, _param: click.Parameter, value: Any) -> None:
        if value is None or value is False:
            return  # not given here: keep what the other position (or the default) set
        if isinstance(value, str) and attr == "log_level":
            value = value.upper()
        setattr(settings(ctx), attr, value)

    return callback


def global_options(func: F) -> F:
    """Declare the global options on a command, so they work before or after its name."""
    options = [
        click.option(
            "--workspace", "-w", metavar="DIR", expose_value=False, callback=_store("workspace"),
            help="Workspace folder holding MEMORY.md, USER.md and memory/ "
            "[env MEMMW_WORKSPACE; default: the current folder].",
        ),
        click.option(
            "--state-dir", metavar="DIR", expose_value=False, callback=_store("state_dir"),
            help="Folder for the derived index [env MEMMW_STATE_DIR; default: one folder per "
            "workspace under the user state directory, see 'memmw status'].",
        ),
        click.option(
            "--agent", metavar="ID", expose_value=False, envvar="MEMMW_AGENT",
            callback=_store("agent"),
            help="Agent id; each agent of a workspace has its own index [env MEMMW_AGENT; "
            "default main].",
        ),
        click.option(
            "--config", metavar="FILE", expose_value=False, envvar="MEMMW_CONFIG",
            callback=_store("config"),
            help="TOML config file [env MEMMW_CONFIG; default <workspace>/memmw.toml].",
        ),
        click.option(
            "--json", "json_", is_flag=True, expose_value=False, callback=_store("json"),
            help="Print one JSON object (camelCase keys, ISO 8601 times) instead of text.",
        ),
        click.option(
            "--quiet", "-q", is_flag=True, expose_value=False, callback=_store("quiet"),
            help="Print only results and errors.",
        ),
        click.option(
            "--verbose", "-v", is_flag=True, expose_value=False, callback=_store("verbose"),
            help="Print more detail and log at INFO.",
        ),
        click.option(
            "--log-level", type=click.Choice(LOG_LEVELS, case_sensitive=False),
            expose_value=False, envvar="MEMMW_LOG_LEVEL", callback=_store("log_level"),
            help="Log level on stderr [env MEMMW_LOG_LEVEL; default WARNING, ERROR with "
            "--quiet, INFO with --verbose].",
        ),
    ]
    # Collect them on a scratch function and put them first in click's (reversed) list,
    # so --help shows the command's own options before the global ones.
    def scratch() -> None:
        pass

    holder: Callable[..., Any] = scratch
    for option in reversed(options):
        holder = option(holder)
    own = list(getattr(func, "__click_params__", []))
    func.__click_params__ = [*holder.__click_params__, *own]  # type: ignore[attr-defined]
    return func


# -- output ------------------------------------------------------------------------------
class PipeClosed(Exception):
    """The reader of stdout went away (``memmw search x | head -2``).

    Not an ``OSError``, so click's own EPIPE handling (exit 1) does not see it; ``main``
    turns it into a quiet exit 0.
    """


def _echo(text: str, err: bool) -> None:
    try:
        click.echo(text, err=err)
    except BrokenPipeError as exc:
        raise PipeClosed() from exc


def out(text: str = "", *, err: bool = False) -> None:
    """Print a line to stdout (or stderr)."""
    _echo(text, err)


def info(text: str) -> None:
    """Print a progress or context line to stderr unless --quiet."""
    if not settings().quiet:
        _echo(text, True)


_CAMEL = re.compile(r"_([a-z0-9])")


def camel(key: str) -> str:
    """``fallback_from`` -> ``fallbackFrom`` (keys already camelCase are unchanged)."""
    return _CAMEL.sub(lambda m: m.group(1).upper(), key)


def camelize(value: Any) -> Any:
    """Recursively turn dict keys into camelCase (one key style for all JSON output)."""
    if isinstance(value, dict):
        return {camel(str(k)): camelize(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [camelize(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def iso(ts: float | None) -> str | None:
    """Epoch seconds -> ISO 8601 UTC (``2026-01-02T03:04:05Z``); None stays None."""
    if ts is None:
        return None
    stamp = dt.datetime.fromtimestamp(ts, tz=dt.timezone.utc).replace(microsecond=0)
    return stamp.isoformat().replace("+00:00", "Z")


def emit_json(obj: dict[str, Any]) -> None:
    """Print one JSON object."""
    _echo(json.dumps(obj, indent=2, ensure_ascii=False, default=str), False)


def report_error(exc: Exception) -> int:
    """Say that a command failed (``{"status": "error"}`` with ``--json``, else one line
    on stderr); returns ``EXIT_ERROR``."""
    if settings().json:
        emit_json({"status": "error", "error": str(exc)})
    else:
        out(f"memmw: error: {exc}", err=True)
    return EXIT_ERROR


# -- memory ------------------------------------------------------------------------------
def open_memory(*, one_shot: bool = True) -> Memory:
    """Open the workspace's memory with the global options.

    ``one_shot`` commands (search, get, status) start no background work: no sync on
    search, no background embedding, so they exit as soon as their answer is printed.
    """
    from memmw.config import MemoryConfig, resolve_workspace
    from memmw.engine.memory import Memory

    s = settings()
    workspace = resolve_workspace(s.workspace).absolute()
    if not workspace.is_dir():
        raise click.UsageError(f"workspace folder not found: {workspace}")
    config = MemoryConfig.load(workspace=workspace, config_file=s.config)
    if one_shot:
        config = dataclasses.replace(
            config, sync=dataclasses.replace(config.sync, on_search=False)
        )
    return Memory(
        workspace=workspace, state_dir=s.state_dir, agent_id=s.agent or "main", config=config
    )


def _quick_unchanged(mem: Memory) -> bool:
    """True when a stat-only walk proves no memory file changed since it was indexed.

    A plain ``os.scandir`` walk of the root files and ``memory/`` compared with the
    indexed paths, sizes and mtimes: about ten times cheaper than full discovery (no
    realpath or path policy per file). Anything unusual (extra paths, a file the walk
    sees that the index lacks, a symlink) returns False, and the full check decides.
    """
    from memmw.workspace.files import MEMORY_DIR, ROOT_FILES

    if mem.config.extra_paths:
        return False
    with mem.store.read() as reader:
        records = reader.file_records(Source.MEMORY)
    indexed = {path: (mtime, size) for path, (_hash, mtime, size) in records.items()}
    seen = 0
    root = str(mem.workspace)
    stack = [(os.path.join(root, MEMORY_DIR), MEMORY_DIR)]
    try:
        for name in ROOT_FILES:
            full = os.path.join(root, name)
            if os.path.lexists(full):
                if name not in indexed or _stat_differs(full, indexed[name]):
                    return False
                seen += 1
        while stack:
            folder, rel = stack.pop()
            if not os.path.isdir(folder):
                continue
            with os.scandir(folder) as entries:
                for entry in entries:
                    if entry.name.startswith("."):
                        continue
                    if entry.is_symlink():
                        return False
                    child = f"{rel}/{entry.name}"
                    if entry.is_dir():
                        stack.append((entry.path, child))
                    elif entry.name.lower().endswith(".md"):
                        if child not in indexed or _stat_differs(entry.path, indexed[child]):
                            return False
                        seen += 1
    except OSError:
        return False
    return seen == len(indexed)


def _stat_differs(path: str, record: tuple[float, int]) -> bool:
    st = os.stat(path)
    return (st.st_mtime, st.st_size) != record


def files_changed(mem: Memory) -> bool:
    """True when memory files changed on disk since the index was built (stat only)."""
    if _quick_unchanged(mem):
        return False
    return bool(mem._files_changed())


def ensure_keyword_index(mem: Memory) -> bool:
    """Build or refresh the keyword index in place when files changed; never embeds.

    Returns:
        True when a sync ran.
    """
    if mem.store.exists() and mem._published() and not files_changed(mem):
        return False
    mem.sync(embeddings="skip")
    return True


def command(**kwargs: Any) -> Callable[[F], click.Command]:
    """``@click.command`` with the global options and a shared help layout."""

    def wrap(func: F) -> click.Command:
        @functools.wraps(func)
        def run(*args: Any, **kw: Any) -> Any:
            settings().configure_logging()  # all options are parsed by now
            return func(*args, **kw)

        decorate: Callable[[Callable[..., Any]], click.Command] = click.command(
            context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
            **kwargs,
        )
        return decorate(global_options(run))

    return wrap


def with_memory(one_shot: bool = True) -> Callable[[F], F]:
    """Pass an open :class:`Memory` as the first argument and close it afterwards."""

    def wrap(func: F) -> F:
        @functools.wraps(func)
        def run(*args: Any, **kwargs: Any) -> Any:
            mem = open_memory(one_shot=one_shot)
            try:
                return func(mem, *args, **kwargs)
            finally:
                mem.close()

        return run  # type: ignore[return-value]

    return wrap


def is_tty(stream: Any = None) -> bool:
    """True when ``stream`` (default stderr) is a terminal."""
    stream = stream or sys.stderr
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def env_flag(name: str) -> bool:
    """True when the environment variable is set to a true-ish value."""
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
