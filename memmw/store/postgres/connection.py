"""Where the PostgreSQL store is (DSN from config or ``MEMMW_STORE_DSN``) and its connection pool."""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from memmw.errors import ConfigError, IndexStoreError
from memmw.redaction import dsn_is_ambiguous, mask_dsn, redact_error

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import ConnectionPool

log = logging.getLogger(__name__)

T = TypeVar("T")

#: Environment variable with the DSN when ``store.dsn`` is not set.
DSN_ENV = "MEMMW_STORE_DSN"
#: How long opening the pool waits for a first connection.
CONNECT_TIMEOUT_S = 10.0


def resolve_dsn(configured: str | None) -> str:
    """The DSN to use: ``store.dsn`` if set, else ``$MEMMW_STORE_DSN``.

    Raises:
        ConfigError: neither is set.
    """
    dsn = (configured or os.environ.get(DSN_ENV) or "").strip()
    if not dsn:
        raise ConfigError(
            f"store.backend is 'postgres' but no DSN is configured: set store.dsn or {DSN_ENV} "
            "(for example postgresql://user@host:5432/dbname)"
        )
    return dsn


def redact_dsn(dsn: str) -> str:
    """The DSN without its password, for messages and status (:func:`memmw.redaction.mask_dsn`:
    masked as written, so a password the driver would misread is never half shown)."""
    return mask_dsn(dsn) or ""


def connect_error(dsn: str, exc: BaseException) -> str:
    """The driver's error text with every trace of the DSN's password removed.

    A URL password with a raw ``@`` or ``/`` is split by libpq at the wrong place (part of
    it becomes the host name and is echoed in its errors): then the driver's text is
    replaced by the fix.
    """
    if dsn_is_ambiguous(dsn):
        return (
            "the password in the DSN holds a raw '@' or '/', which the driver misreads: "
            "percent-encode it ('@' is %40, '/' is %2F) or use ~/.pgpass"
        )
    return redact_error(str(exc), dsn=dsn)


#: Set while this thread takes a connection whose first round trip checks it (``probed``).
_probing = threading.local()


def _check(conn: psycopg.Connection[Any]) -> None:
    """The pool's check of a connection before handing it out (a round trip), skipped
    for ``probed``, whose own first round trip finds a dead connection."""
    if getattr(_probing, "on", False):
        return
    from psycopg_pool import ConnectionPool

    ConnectionPool.check_connection(conn)


@contextlib.contextmanager
def probed(
    pool: ConnectionPool[Any], first: Callable[[psycopg.Connection[Any]], T]
) -> Iterator[tuple[psycopg.Connection[Any], T]]:
    """A pooled connection and the result of ``first(conn)``, its first round trip.

    A connection that died (the server restarted) fails that round trip: the pool drops
    it and the next one is tried, as the pool's own check would have, without that
    check's round trip before every use (a search's reads go through here). ``first``
    must be safe to repeat (a read, a BEGIN).
    """
    import psycopg

    attempts = pool.max_size + 1
    for attempt in range(attempts):
        with contextlib.ExitStack() as stack:
            _probing.on = True
            try:
                conn = stack.enter_context(pool.connection())
            finally:
                _probing.on = False
            try:
                value = first(conn)
            except psycopg.OperationalError:
                if not conn.broken or attempt == attempts - 1:
                    raise
                log.info("a pooled PostgreSQL connection was lost; trying another")
                continue  # returned broken: the pool replaces it
            yield conn, value
            return


def _configure(conn: psycopg.Connection[Any]) -> None:
    from pgvector.psycopg import register_vector

    register_vector(conn)


def import_driver() -> None:
    """Import psycopg, psycopg-pool and pgvector, or say which extra to install.

    Raises:
        ConfigError: the ``postgres`` extra is not installed.
    """
    try:
        import pgvector.psycopg  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        raise ConfigError(
            f"store.backend 'postgres' needs the postgres extra: pip install 'memmw[postgres]' "
            f"({exc})"
        ) from exc


def open_pool(dsn: str, *, max_size: int = 4) -> ConnectionPool[Any]:
    """Migrate the database and open an autocommit connection pool with pgvector registered.

    Raises:
        ConfigError: the ``postgres`` extra is missing.
        IndexStoreError: the server is unreachable or the schema could not be migrated.
    """
    import_driver()
    import psycopg
    from psycopg_pool import ConnectionPool, PoolTimeout

    from memmw.store.postgres.schema import migrate

    try:
        with psycopg.connect(dsn, autocommit=True, connect_timeout=int(CONNECT_TIMEOUT_S)) as conn:
            migrate(conn)
    except psycopg.Error as exc:
        raise IndexStoreError(
            f"cannot open the PostgreSQL store at {redact_dsn(dsn)}: {connect_error(dsn, exc)}"
            .strip()
        ) from exc
    pool: ConnectionPool[Any] = ConnectionPool(
        dsn,
        min_size=1,
        max_size=max_size,
        kwargs={"autocommit": True},
        configure=_configure,
        # A connection that died with the server is replaced, not handed out (``probed``
        # checks by its first round trip instead).
        check=_check,
        open=False,
        name="memmw",
    )
    pool.open()
    try:
        pool.wait(timeout=CONNECT_TIMEOUT_S)
    except PoolTimeout as exc:
        pool.close()
        raise IndexStoreError(
            f"cannot connect to PostgreSQL at {redact_dsn(dsn)}: {connect_error(dsn, exc)}"
        ) from exc
    return pool
