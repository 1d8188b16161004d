"""State folders under the user state root: list them, prune orphans, share their caches.

Every workspace indexed with the default state location gets ``<root>/workspaces/<key>``
(:func:`memmw.statedir.default_state_dir`), keyed by the workspace's path. A moved or
deleted workspace leaves its folder behind; this module lists those folders (which
workspace each index records, whether it still exists, size, last sync, agents), prunes
the ones whose workspace is gone (holding each index's writer and ``embed`` locks, so a
folder in use is never touched), and lets a new state folder read the embedding caches
of the others (:class:`SiblingCaches`): cache rows are keyed by provider identity and
the sha256 of the chunk text, never by path, so a vector found in another folder is the
vector this one would compute.

Internal module.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from memmw.config import MemoryConfig
from memmw.errors import IndexBusyError, MemmwError
from memmw.statedir import INDEX_DIR, user_state_root
from memmw.store.factory import create_store
from memmw.store.protocol import Store

log = logging.getLogger(__name__)

#: Where the default state folders live, under the user state root.
WORKSPACES = "workspaces"


@dataclass(frozen=True)
class StateFolder:
    """One state folder and what its indexes record.

    Attributes:
        path: The folder.
        workspace: The workspace folder its indexes record (None: no readable index).
        workspace_exists: Whether that workspace folder exists on this machine.
        size: Bytes used by every file under the folder.
        last_sync: Latest ``last_sync`` (Unix time) of its indexes, None if never.
        agents: Agent ids that have an index here (``memory/<agent>.sqlite``).
        problems: Indexes that could not be read, with the reason.
        transcripts: Session transcript files kept here (``agents/*/sessions``): they are
            not derived from the workspace, so a prune keeps their folder unless told.
    """

    path: Path
    workspace: str | None
    workspace_exists: bool
    size: int
    last_sync: float | None
    agents: tuple[str, ...]
    problems: tuple[str, ...] = ()
    transcripts: int = 0

    @property
    def orphan(self) -> bool:
        """True when the recorded workspace is gone (the folder can be pruned)."""
        return self.workspace is not None and not self.workspace_exists


@dataclass
class PruneReport:
    """What ``prune_state_folders`` removed, would remove, or left alone and why."""

    removed: list[StateFolder] = field(default_factory=list)
    skipped: list[tuple[StateFolder, str]] = field(default_factory=list)
    dry_run: bool = True


def workspaces_root(root: Path | None = None) -> Path:
    """``<user state root>/workspaces`` (or under ``root``)."""
    return (root if root is not None else user_state_root()) / WORKSPACES


def _indexes(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / INDEX_DIR).glob("*.sqlite") if p.is_file())


def _size(folder: Path) -> int:
    total = 0
    for p in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
    return total


def _open(db: Path) -> Store:
    return create_store(MemoryConfig(provider="none"), db_path=db, agent_id=db.stem)


def describe_state_folder(folder: Path) -> StateFolder:
    """Read what the indexes of ``folder`` record (never writes a Markdown file)."""
    workspace: str | None = None
    last: float | None = None
    problems: list[str] = []
    agents: list[str] = []
    for db in _indexes(folder):
        agents.append(db.stem)
        store = _open(db)
        try:
            with store.read() as reader:
                recorded = reader.get_meta("workspace")
                raw = reader.get_meta("last_sync")
        except MemmwError as exc:
            problems.append(f"{db.name}: {exc}")
            continue
        finally:
            store.close()
        workspace = workspace or recorded
        if raw:
            with contextlib.suppress(ValueError):
                last = max(last or 0.0, float(raw))
    exists = workspace is not None and Path(workspace).is_dir()
    transcripts = sum(1 for p in folder.glob("agents/*/sessions/**/*") if p.is_file())
    return StateFolder(
        path=folder,
        workspace=workspace,
        workspace_exists=exists,
        size=_size(folder),
        last_sync=last,
        agents=tuple(agents),
        problems=tuple(problems),
        transcripts=transcripts,
    )


def list_state_folders(root: Path | None = None) -> list[StateFolder]:
    """Every state folder under ``<root>/workspaces`` (default: the user state root), by name."""
    base = workspaces_root(root)
    if not base.is_dir():
        return []
    return [describe_state_folder(p) for p in sorted(base.iterdir()) if p.is_dir()]


@contextlib.contextmanager
def _hold_all(folder: Path) -> Iterator[None]:
    """Hold the writer and ``embed`` locks of every index in ``folder`` (never waits).

    Raises:
        IndexBusyError: another process holds one of them.
    """
    with contextlib.ExitStack() as stack:
        for db in _indexes(folder):
            store = _open(db)
            stack.callback(store.close)
            stack.enter_context(store.writer_lock(timeout=0, what="prune"))
            stack.enter_context(store.named_lock("embed", timeout=0))
        yield


def prune_state_folders(
    root: Path | None = None, *, dry_run: bool = True, include_transcripts: bool = False
) -> PruneReport:
    """Remove the state folders whose recorded workspace no longer exists.

    A folder whose indexes record no workspace (none readable) is left alone: nothing
    says it is an orphan. With ``dry_run`` (the default) nothing is removed and the
    report lists what would be. A folder whose index lock is held is skipped, and so is
    one holding session transcripts unless ``include_transcripts``.

    Args:
        root: The user state root (default :func:`memmw.statedir.user_state_root`).
        dry_run: Only report.
        include_transcripts: Also remove folders that hold session transcripts.
    """
    report = PruneReport(dry_run=dry_run)
    for folder in list_state_folders(root):
        if not folder.orphan:
            continue
        if folder.transcripts and not include_transcripts:
            report.skipped.append(
                (folder, f"holds {folder.transcripts} session transcripts (include them to remove)")
            )
            continue
        try:
            with _hold_all(folder.path):
                # Re-checked under the locks: the workspace may have come back meanwhile.
                if folder.workspace is not None and Path(folder.workspace).is_dir():
                    report.skipped.append((folder, "its workspace exists again"))
                    continue
                if not dry_run:
                    shutil.rmtree(folder.path)
                report.removed.append(folder)
        except IndexBusyError as exc:
            report.skipped.append((folder, f"in use: {exc}"))
        except OSError as exc:
            report.skipped.append((folder, f"could not remove: {exc}"))
    return report


class SiblingCaches:
    """Embedding-cache lookups in the other SQLite state folders under the user state root.

    A new state folder (a moved or copied workspace, a restored one) starts with an empty
    cache; the vectors of its chunks are usually in another folder's cache already.
    Lookups are by the content key only (provider, model, endpoint key, chunk hash), so
    nothing about another workspace reaches this index except vectors of text it has.
    Stores are opened on first use and closed by :meth:`close`; unreadable ones are skipped.
    """

    def __init__(self, own_db: Path, root: Path | None = None) -> None:
        self._own = own_db.resolve()
        self._root = root
        self._stores: list[Store] | None = None

    def _open_all(self) -> list[Store]:
        if self._stores is None:
            self._stores = []
            base = workspaces_root(self._root)
            if base.is_dir():
                for folder in sorted(base.iterdir()):
                    for db in _indexes(folder):
                        if db.resolve() != self._own:
                            self._stores.append(_open(db))
        return self._stores

    def __call__(
        self, provider: str, model: str, provider_key: str, hashes: Sequence[str]
    ) -> dict[str, bytes]:
        """``{hash: blob}`` of the wanted hashes found in any other folder's cache."""
        found: dict[str, bytes] = {}
        for store in self._open_all():
            wanted = [h for h in hashes if h not in found]
            if not wanted:
                break
            try:
                with store.read() as reader:
                    found.update(reader.cached_embeddings(provider, model, provider_key, wanted))
            except MemmwError as exc:  # a damaged or busy sibling is only a missed hint
                log.debug("skipping the cache of %s: %s", store.location, exc)
        return found

    def close(self) -> None:
        """Close the stores opened for lookups."""
        for store in self._stores or []:
            with contextlib.suppress(MemmwError):
                store.close()
        self._stores = None
