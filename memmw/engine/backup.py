"""Backup and restore: the workspace's Markdown and its embedding vectors in one checked archive.

The archive is a gzip'd tar holding ``manifest.json`` first, then ``workspace/<path>``
for every file memmw treats as memory (and ``memmw.toml`` when present), then
``embeddings.jsonl``: one JSON object per chunk text, ``{"hash", "dims", "vector"}``,
the vector being base64 of little-endian float32 (unit length), keyed by the sha256 of the
chunk text, the same content key as the embedding cache. The manifest records the format,
the memmw version, the provider identity (provider, model, endpoint key, dims) and the
sha256 and size of every other member.

The index itself is derived and not archived: a restore writes the files, imports the
vectors into the new index's embedding cache (through the store protocol, so SQLite and
PostgreSQL alike) and syncs, which embeds nothing the archive held.

A restore reads and checks the whole archive before it writes anything: a damaged,
truncated or tampered archive is refused with :class:`ArchiveError` and leaves the target
untouched.

Internal module: use ``Memory.backup`` and ``Memory.restore``.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import importlib.metadata
import io
import json
import os
import tarfile
import time
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from memmw.config import CONFIG_FILE_NAME, MemoryConfig, Source
from memmw.errors import ArchiveError as ArchiveError
from memmw.errors import ConfigError
from memmw.store.vectors import blob_ok
from memmw.text.chunking import sha256_text
from memmw.workspace.files import discover

if TYPE_CHECKING:
    from memmw.engine.memory import Memory

#: Archive format; a restore refuses any other.
FORMAT = "memmw-backup/1"
MANIFEST = "manifest.json"
EMBEDDINGS = "embeddings.jsonl"
FILES_PREFIX = "workspace/"
#: Chunks read per store call while exporting.
_READ_BATCH = 500


@dataclass(frozen=True)
class BackupReport:
    """What ``Memory.backup`` wrote.

    Attributes:
        path: The archive.
        files: Workspace files archived.
        vectors: Chunk vectors archived (chunks without a vector yet are not).
        missing_vectors: Chunks of the index that had no vector to archive.
        size: Archive size in bytes.
        skipped: Memory files outside the workspace folder (extra paths), not archived.
    """

    path: Path
    files: int
    vectors: int
    missing_vectors: int
    size: int
    skipped: tuple[str, ...] = ()


@dataclass(frozen=True)
class RestoreReport:
    """What a restore did.

    Attributes:
        workspace: The restored workspace folder.
        files: Files written.
        vectors_imported: Vectors put into the embedding cache.
        embedded: Chunks the provider had to embed on the first sync.
        from_cache: Chunks whose vectors came from the cache.
        warning: A provider mismatch or an embedding problem, or None.
    """

    workspace: Path
    files: int
    vectors_imported: int
    embedded: int
    from_cache: int
    warning: str | None = None


@dataclass
class Archive:
    """A read and verified archive: the manifest, the files and the vectors."""

    manifest: dict[str, Any]
    files: dict[str, bytes] = field(default_factory=dict)
    vectors: dict[str, bytes] = field(default_factory=dict)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _version() -> str:
    """The installed memmw version (the package root is a layer above this one)."""
    try:
        return importlib.metadata.version("memmw")
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "unknown"


def _chunk_vectors(mem: Memory) -> tuple[dict[str, bytes], int]:
    """``{sha256 of chunk text: vector blob}`` of the memory chunks; and how many had none."""
    identity = mem._provider_identity()
    vectors: dict[str, bytes] = {}
    without: list[str] = []
    with mem.store.read() as reader:
        by_rowid = dict(reader.vector_rows([Source.MEMORY]))
        ids = reader.chunk_rowids([Source.MEMORY])
        for start in range(0, len(ids), _READ_BATCH):
            rows = reader.chunks(ids[start : start + _READ_BATCH])
            for rowid, row in rows.items():
                digest = sha256_text(row.text)
                blob = by_rowid.get(rowid)
                if blob is not None:
                    vectors[digest] = blob
                else:
                    without.append(digest)
        if without and identity.provider:
            found = reader.cached_embeddings(
                identity.provider, identity.model, identity.provider_key, without
            )
            vectors.update(found)
    missing = len({h for h in without if h not in vectors})
    return vectors, missing


def backup(mem: Memory, path: str | os.PathLike[str], *, sync: bool = True) -> BackupReport:
    """Write ``mem``'s workspace Markdown and chunk vectors to the archive ``path``.

    Args:
        mem: The memory to back up.
        path: The archive to write (replaced atomically when it exists).
        sync: Bring the index (and its vectors) up to date first, so that the archive
            holds a vector for every chunk.
    """
    target = Path(path)
    if sync:
        mem.sync()
    files, _issues = discover(mem.workspace, mem.config.extra_paths)
    members: dict[str, bytes] = {}
    skipped: list[str] = []
    root = mem.workspace.resolve()
    for f in files:
        if not _safe_name(f.path):  # an extra path outside the workspace folder
            skipped.append(str(f.abs_path))
            continue
        members[FILES_PREFIX + f.path] = f.abs_path.read_bytes()
    config_file = mem.workspace / CONFIG_FILE_NAME
    if config_file.is_file() and not config_file.is_symlink():
        members[FILES_PREFIX + CONFIG_FILE_NAME] = config_file.read_bytes()
    vectors, missing = _chunk_vectors(mem)
    lines = [
        json.dumps(
            {"hash": h, "dims": len(b) // 4, "vector": base64.b64encode(b).decode("ascii")},
            separators=(",", ":"),
        )
        for h, b in sorted(vectors.items())
    ]
    members[EMBEDDINGS] = ("\n".join(lines) + "\n" if lines else "").encode("ascii")
    identity = mem._provider_identity()
    dims = {len(b) // 4 for b in vectors.values()}
    created = time.time()
    manifest: dict[str, Any] = {
        "format": FORMAT,
        "memmwVersion": _version(),
        "createdAt": created,
        "workspace": str(root),
        "agentId": mem.agent_id,
        "provider": {
            "provider": identity.provider,
            "model": identity.model,
            "providerKey": identity.provider_key,
            "dims": dims.pop() if len(dims) == 1 else None,
        },
        "vectorEncoding": "base64 float32 little-endian, unit length",
        "members": {name: {"sha256": _sha(data), "size": len(data)} for name, data in members.items()},
    }
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with tarfile.open(tmp, "w:gz") as tar:
            for name, data in [(MANIFEST, json.dumps(manifest, indent=1).encode()), *members.items()]:
                info = tarfile.TarInfo(name)
                info.size = len(data)
                info.mtime = int(created)
                info.mode = 0o644
                tar.addfile(info, io.BytesIO(data))
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return BackupReport(
        path=target,
        files=sum(1 for n in members if n.startswith(FILES_PREFIX)),
        vectors=len(vectors),
        missing_vectors=missing,
        size=target.stat().st_size,
        skipped=tuple(skipped),
    )


def _safe_name(name: str) -> bool:
    p = PurePosixPath(name)
    return not p.is_absolute() and ".." not in p.parts and "\\" not in name and bool(p.parts)


def read_archive(path: str | os.PathLike[str]) -> Archive:
    """Read and verify an archive completely (nothing is written).

    Raises:
        ArchiveError: unreadable, not a memmw backup, a member missing, extra or altered,
            an unsafe member name, or a malformed vector.
    """
    src = Path(path)
    if not src.is_file():
        raise ArchiveError(f"no backup archive at {src}")
    data: dict[str, bytes] = {}
    try:
        with tarfile.open(src, "r:gz") as tar:
            for info in tar:
                if not info.isfile():
                    raise ArchiveError(f"{src}: unexpected member {info.name!r} (not a file)")
                if info.name in data:
                    raise ArchiveError(f"{src}: member {info.name!r} appears twice")
                fh = tar.extractfile(info)
                if fh is None:  # pragma: no cover - regular files always have data
                    raise ArchiveError(f"{src}: member {info.name!r} has no data")
                data[info.name] = fh.read()
    except ArchiveError:
        raise
    except (tarfile.TarError, EOFError, OSError, zlib.error, gzip.BadGzipFile) as exc:
        raise ArchiveError(f"{src} is not a readable backup archive (damaged?): {exc}") from exc
    raw = data.pop(MANIFEST, None)
    if raw is None:
        raise ArchiveError(f"{src} has no {MANIFEST}: not a memmw backup")
    try:
        manifest = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ArchiveError(f"{src}: {MANIFEST} is not valid JSON") from exc
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        found = manifest.get("format") if isinstance(manifest, dict) else None
        raise ArchiveError(f"{src}: unknown backup format {found!r} (expected {FORMAT})")
    listed = manifest.get("members")
    if not isinstance(listed, dict):
        raise ArchiveError(f"{src}: {MANIFEST} lists no members")
    if set(listed) != set(data):
        lost = sorted(set(listed) - set(data))
        extra = sorted(set(data) - set(listed))
        raise ArchiveError(f"{src}: members missing {lost[:5]} or not in the manifest {extra[:5]}")
    for name, body in data.items():
        entry = listed[name]
        if not isinstance(entry, dict) or entry.get("sha256") != _sha(body):
            raise ArchiveError(f"{src}: checksum mismatch for {name!r}: the archive is damaged")
        if name != EMBEDDINGS and not (name.startswith(FILES_PREFIX) and _safe_name(name)):
            raise ArchiveError(f"{src}: unsafe member name {name!r}")
    archive = Archive(manifest=manifest)
    for name, body in data.items():
        if name.startswith(FILES_PREFIX):
            archive.files[name[len(FILES_PREFIX) :]] = body
    archive.vectors = _parse_vectors(src, data.get(EMBEDDINGS, b""))
    return archive


def _parse_vectors(src: Path, body: bytes) -> dict[str, bytes]:
    vectors: dict[str, bytes] = {}
    for n, line in enumerate(body.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            digest, dims = str(row["hash"]), int(row["dims"])
            blob = base64.b64decode(row["vector"], validate=True)
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise ArchiveError(f"{src}: {EMBEDDINGS} line {n} is malformed") from exc
        if len(blob) != dims * 4 or not blob_ok(blob, dims):
            raise ArchiveError(f"{src}: {EMBEDDINGS} line {n} holds an invalid vector")
        vectors[digest] = blob
    return vectors


def _occupied(folder: Path) -> bool:
    return folder.exists() and (not folder.is_dir() or any(folder.iterdir()))


def restore(
    path: str | os.PathLike[str],
    workspace: str | os.PathLike[str],
    state_dir: str | os.PathLike[str] | None = None,
    *,
    force: bool = False,
    agent_id: str = "main",
    config: MemoryConfig | None = None,
) -> RestoreReport:
    """Restore an archive into ``workspace``: verify, write the files, import vectors, index.

    Args:
        path: The archive.
        workspace: Target folder; created when missing. Must be empty unless ``force``
            (then files of the archive replace files of the same name; others stay).
        state_dir: State folder for the new index (default: the workspace's own).
        force: Write into a non-empty workspace.
        agent_id: Agent whose index is built.
        config: Settings (default: the restored ``memmw.toml`` and ``MEMMW__*``).

    Raises:
        ArchiveError: the archive is damaged or not a memmw backup (nothing written).
        ConfigError: the workspace is not empty and ``force`` is not set.
    """
    from memmw.engine.memory import Memory  # the facade imports this module

    archive = read_archive(path)
    target = Path(workspace).expanduser().absolute()
    if _occupied(target) and not force:
        raise ConfigError(
            f"the workspace {target} is not empty; restore into an empty folder or pass "
            "force=True (--force) to overwrite files of the same name"
        )
    if target.exists() and not target.is_dir():
        raise ConfigError(f"the workspace {target} is not a folder")
    root = target.resolve()
    for rel in archive.files:
        # With --force the target may hold symlinked folders: never write through one
        # to a place outside the workspace.
        parent = (target / rel).parent.resolve()
        if parent != root and root not in parent.parents:
            raise ConfigError(f"{rel} would be written outside {target} (a symlinked folder)")
    for rel, body in sorted(archive.files.items()):
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        tmp = dest.with_name(f".{dest.name}.restore.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, dest)
    target.mkdir(parents=True, exist_ok=True)
    with Memory(workspace=target, state_dir=state_dir, agent_id=agent_id, config=config) as mem:
        mem.sync(embeddings="skip")
        imported, warning = import_vectors(mem, archive.manifest, archive.vectors)
        report = mem.sync()
        backfill = mem._backfill_report
    return RestoreReport(
        workspace=target,
        files=len(archive.files),
        vectors_imported=imported,
        embedded=report.embedded,
        from_cache=backfill.from_cache if backfill is not None else 0,
        warning=warning or report.warning,
    )


def import_vectors(
    mem: Memory, manifest: Mapping[str, Any], vectors: Mapping[str, bytes]
) -> tuple[int, str | None]:
    """Put the archive's vectors into ``mem``'s embedding cache under the archive's identity.

    Returns how many were imported and a warning when the archive's provider is not the
    one ``mem`` uses (its vectors then stay in the cache for a switch back, and the
    current provider embeds the chunks).
    """
    ident = manifest.get("provider") or {}
    provider, model, key = ident.get("provider"), ident.get("model"), ident.get("providerKey")
    if not vectors or not (provider and model and key):
        return 0, None
    with mem.store.write(what="restore") as writer, writer.transaction():
        writer.put_embeddings(str(provider), str(model), str(key), dict(vectors))
    mine = mem._provider_identity()
    if (mine.provider, mine.model, mine.provider_key) != (provider, model, key):
        return len(vectors), (
            f"the archive's vectors are for {provider}/{model}, this memory uses "
            f"{mine.provider or 'no provider'}/{mine.model or '-'}: its chunks are embedded again"
        )
    return len(vectors), None
