"""``memmw doctor``: check the setup and say what to fix."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memmw.cli.common import (
    EXIT_DEGRADED,
    EXIT_ERROR,
    EXIT_OK,
    command,
    emit_json,
    out,
    settings,
)
from memmw.workspace.layout import MEMORY_DIR

HELP = """Check the setup: workspace, config, state folder, index health, embedding
providers, SQLite extensions, optional packages and file-watch limits. Each problem comes
with what to do about it.

\b
Examples:
  memmw doctor
  memmw doctor --no-probe     # do not embed a test query
  memmw doctor --json

Exit codes: 0 all good, 4 warnings only, 1 at least one check failed.
"""


@dataclasses.dataclass
class Check:
    """One line of the report."""

    name: str
    status: str  # ok | warn | fail | info
    detail: str
    fix: str | None = None


def _workspace_checks(workspace: Path) -> list[Check]:
    if not workspace.is_dir():
        return [Check("workspace", "fail", f"{workspace} is not a folder",
                      "pass --workspace DIR or set MEMMW_WORKSPACE")]
    found = [n for n in ("MEMORY.md", "USER.md", MEMORY_DIR) if (workspace / n).exists()]
    checks = [Check(
        "workspace", "ok" if found else "warn",
        f"{workspace} ({', '.join(found) if found else 'no MEMORY.md, USER.md or memory/'})",
        None if found else "create MEMORY.md or memory/YYYY-MM-DD.md notes, or point "
        "--workspace at the agent's folder",
    )]
    target = workspace / MEMORY_DIR if (workspace / MEMORY_DIR).is_dir() else workspace
    if not os.access(target, os.W_OK | os.X_OK):
        checks.append(Check("workspace writable", "warn", f"{target} is read-only",
                            "memory_append cannot save notes until it is writable"))
    return checks


def _inotify_check(workspace: Path) -> Check:
    limit_file = Path("/proc/sys/fs/inotify/max_user_watches")
    if not limit_file.exists():
        return Check("file watches", "info", "no inotify limit on this platform")
    try:
        limit = int(limit_file.read_text().strip())
    except (OSError, ValueError) as exc:
        return Check("file watches", "warn", f"cannot read {limit_file}: {exc}")
    folders = 1
    memory_dir = workspace / MEMORY_DIR
    if memory_dir.is_dir():
        folders += sum(1 for _root, _dirs, _files in os.walk(memory_dir))
    if limit < folders * 4 or limit < 8192:
        return Check(
            "file watches", "warn",
            f"fs.inotify.max_user_watches is {limit} (this workspace needs about {folders})",
            "sudo sysctl fs.inotify.max_user_watches=524288 (and add it to /etc/sysctl.conf); "
            "without watches 'memmw watch' polls and searches sync on demand",
        )
    instances_file = Path("/proc/sys/fs/inotify/max_user_instances")
    try:
        instances = int(instances_file.read_text().strip())
    except (OSError, ValueError):
        instances = None
    if instances is not None and instances < 128:
        return Check(
            "file watches", "warn",
            f"fs.inotify.max_user_instances is {instances}: each watching process (an agent, "
            "'memmw watch', 'memmw mcp') needs one, and editors use many",
            "sudo sysctl fs.inotify.max_user_instances=512",
        )
    return Check("file watches", "ok", f"fs.inotify.max_user_watches {limit}, "
                 f"max_user_instances {instances}, {folders} folders to watch")


def _state_check(state_dir: Path) -> Check:
    existing = state_dir
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent  # it is created on the first index run
    if os.access(existing, os.W_OK | os.X_OK):
        return Check("state folder", "ok", str(state_dir))
    return Check("state folder", "fail", f"{state_dir}: {existing} is not writable",
                 "pass --state-dir DIR (or MEMMW_STATE_DIR) pointing at a writable folder")


def _package(name: str, module: str, purpose: str, extra: str, *, needed: bool) -> Check:
    present = importlib.util.find_spec(module) is not None
    if present:
        return Check(name, "ok", f"installed ({purpose})")
    return Check(name, "warn" if needed else "info", f"not installed ({purpose})",
                 f"pip install 'memmw[{extra}]'")


def _index_checks(mem: Any) -> list[Check]:
    checks: list[Check] = []
    db = mem.store.location
    if not mem.store.exists():
        return [Check("index", "warn", f"{db} does not exist yet", "run 'memmw index'")]
    health = mem.store.health()
    if not health.opened:
        return [Check("index", "fail", f"{db}: {health.detail}",
                      "'memmw reset --yes' then 'memmw index' rebuilds it from the files")]
    fts = health.features.get("fts5", False)
    if not health.ok:
        checks.append(Check("index", "fail", f"{db}: integrity check says {health.detail}",
                            "'memmw reset --yes' then 'memmw index' rebuilds it from the files"))
    else:
        checks.append(Check("index", "ok", f"{db} ({health.chunks} chunks, integrity ok)"))
    checks.append(Check("FTS5", "ok" if fts else "warn",
                        "available" if fts else "this SQLite has no FTS5",
                        None if fts else "keyword search uses the in-memory matrix; install a "
                        "Python whose sqlite3 has FTS5 for the fts5 backend"))
    return checks


def _provider_checks(mem: Any, probe: bool) -> list[Check]:
    from memmw.errors import MemmwError

    checks: list[Check] = []
    keys = [v for v in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY") if os.environ.get(v)]
    checks.append(Check("API keys", "info", ", ".join(keys) + " set" if keys else "none set"))
    try:
        selection = mem.selection
    except MemmwError as exc:
        return [*checks, Check("embedding provider", "fail", str(exc),
                               "fix the provider's key or package, set fallback, or "
                               "provider = 'none' for keyword-only search")]
    provider = selection.provider
    if provider is None and selection.requested == "none":
        checks.append(Check("embedding provider", "info", "none: keyword-only by configuration"))
        return checks
    if provider is None:
        checks.append(Check("embedding provider", "warn",
                            f"keyword-only: {selection.unavailable_reason}",
                            "pip install 'memmw[offline]' for the offline model, or set an "
                            "API key"))
        return checks
    detail = f"{provider.id} ({provider.model}); requested {selection.requested}"
    if selection.fallback_from:
        checks.append(Check("embedding provider", "warn",
                            f"{detail}; fallback from {selection.fallback_from}: "
                            f"{selection.fallback_reason}",
                            f"fix the {selection.fallback_from} provider"))
    else:
        checks.append(Check("embedding provider", "ok", detail))
    if probe:
        # As a search embeds its query: through the breaker, within remote.query_timeout_s.
        result = mem.probe_embedding("memmw doctor probe")
        if result["ok"]:
            checks.append(Check("embedding probe", "ok", f"{result['dims']} dimensions"))
        else:
            checks.append(Check("embedding probe", "fail", str(result["error"]),
                                "check the key, quota and network of the provider"))
    return checks


@command(name="doctor", help=HELP, short_help="Check the setup and say what to fix.")
@click.option("--no-probe", is_flag=True, help="Do not embed a test query.")
def doctor(no_probe: bool) -> int:
    """Run every check and print the report."""
    from memmw import __version__
    from memmw.config import MemoryConfig, resolve_workspace
    from memmw.engine.memory import Memory
    from memmw.errors import MemmwError
    from memmw.store.factory import sqlite_vec_status

    s = settings()
    workspace = resolve_workspace(s.workspace).absolute()
    checks: list[Check] = [
        Check("memmw", "info", f"{__version__} on Python {sys.version.split()[0]}"),
        *_workspace_checks(workspace),
    ]
    mem: Memory | None = None
    if workspace.is_dir():
        try:
            config = MemoryConfig.load(workspace=workspace, config_file=s.config)
            checks.append(Check("config", "ok", f"provider {config.provider}, sources "
                                f"{', '.join(config.sources)}"))
            mem = Memory(workspace=workspace, state_dir=s.state_dir,
                         agent_id=s.agent or "main", config=config)
        except MemmwError as exc:
            checks.append(Check("config", "fail", str(exc), "fix the setting named above"))
    steps: list[Callable[[], list[Check]]] = []
    if mem is not None:
        m = mem
        steps += [
            lambda: [_state_check(m.state_dir)],
            lambda: _index_checks(m),
            lambda: _provider_checks(m, not no_probe),
        ]
    loadable, why = sqlite_vec_status()
    steps += [
        lambda: [Check("sqlite-vec", "ok" if loadable else "info", why,
                       None if loadable else "optional: pip install 'memmw[vec]'")],
        lambda: [_package("watchdog", "watchdog", "file watching", "watch", needed=False)],
        lambda: [_package("mcp", "mcp", "'memmw mcp'", "mcp", needed=False)],
        lambda: [_package("tiktoken", "tiktoken", "exact token counts", "tokens", needed=False)],
        lambda: [_inotify_check(workspace)],
    ]
    try:
        for step in steps:
            try:
                checks.extend(step())
            except Exception as exc:  # one broken check must not hide the others
                checks.append(Check("check", "fail", f"{type(exc).__name__}: {exc}"))
    finally:
        if mem is not None:
            mem.close()
    failed = any(c.status == "fail" for c in checks)
    warned = any(c.status == "warn" for c in checks)
    if s.json:
        emit_json({"ok": not failed and not warned,
                   "checks": [dataclasses.asdict(c) for c in checks]})
    else:
        width = max(len(c.name) for c in checks)
        for c in checks:
            out(f"{c.status.upper():4}  {c.name.ljust(width)}  {c.detail}")
            if c.fix and c.status != "ok":
                out(f"{'':4}  {''.ljust(width)}  fix: {c.fix}")
    return EXIT_ERROR if failed else EXIT_DEGRADED if warned else EXIT_OK
