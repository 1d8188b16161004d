"""The Markdown workspace: file discovery, the read path policy and crash-safe writes."""

from __future__ import annotations

import contextlib
import fnmatch
import logging
import os
import re
import stat
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from memmw.config import ExtraPath
from memmw.errors import PathPolicyError
from memmw.locks import exclusive_lock
from memmw.types import FileIssue

log = logging.getLogger(__name__)

ROOT_FILES = ("MEMORY.md", "memory.md", "USER.md")
MEMORY_DIR = "memory"
#: Folders never walked: version control, package managers, virtualenvs, caches.
IGNORED_DIRS = frozenset(
    {
        ".git",
        "node_modules",
        ".pnpm-store",
        ".venv",
        "venv",
        ".tox",
        "__pycache__",
        ".mypy_cache",
        ".pytest_cache",
        ".ruff_cache",
        ".cache",
        "site-packages",
    }
)
_DATED = re.compile(r"^(\d{4})-(\d{2})-(\d{2})(?:-.+)?\.md$")


@dataclass(frozen=True, kw_only=True)
class WorkspaceFile:
    """A discovered Markdown file.

    Attributes:
        path: Workspace-relative posix path (``../`` prefixed when outside the workspace).
        abs_path: Absolute path used to read it.
        source: Index source (``memory``).
    """

    path: str
    abs_path: Path
    source: str = "memory"


def is_ignored_dir(name: str) -> bool:
    """True for hidden folders and tool folders that discovery and the watcher skip."""
    return name.startswith(".") or name in IGNORED_DIRS


def relative_posix(path: Path, workspace: Path) -> str:
    """``path`` relative to ``workspace`` with ``/`` separators (may start with ``../``)."""
    return Path(os.path.relpath(path, workspace)).as_posix()


def _is_regular_file(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISREG(st.st_mode)


def _walk_markdown(root: Path) -> Iterator[Path]:
    """Yield regular ``.md`` files below ``root``, never following symlinks."""
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(dirpath)
        dirnames[:] = sorted(
            d for d in dirnames if not is_ignored_dir(d) and not (base / d).is_symlink()
        )
        for name in sorted(filenames):
            candidate = base / name
            if name.lower().endswith(".md") and _is_regular_file(candidate):
                yield candidate


def _glob_match(rel: str, pattern: str) -> bool:
    if fnmatch.fnmatchcase(rel, pattern):
        return True
    # "**/x.md" should also match "x.md" at the top of the entry.
    return pattern.startswith("**/") and fnmatch.fnmatchcase(rel, pattern[3:])


def resolve_extra_path(entry: ExtraPath, workspace: Path) -> Path:
    """Absolute path of an extra-path entry (``~`` expanded, relative to the workspace)."""
    raw = Path(os.path.expanduser(entry.path))
    return raw if raw.is_absolute() else workspace / raw


def discover(
    workspace: Path, extra_paths: Iterable[ExtraPath] = ()
) -> tuple[list[WorkspaceFile], list[FileIssue]]:
    """Find every Markdown file memmw indexes.

    Root ``MEMORY.md``/``memory.md``/``USER.md``, ``memory/**/*.md`` and the extra paths.
    Symlinks and non-regular files are skipped, hidden and tool folders are not walked,
    and files reached twice are de-duplicated by realpath.

    Returns:
        The files (sorted by path) and the issues found (missing extra paths, symlinks).
    """
    workspace = Path(os.path.abspath(workspace))
    found: list[WorkspaceFile] = []
    issues: list[FileIssue] = []
    seen: set[str] = set()

    def add(abs_path: Path) -> None:
        real = os.path.realpath(abs_path)
        if real in seen:
            return
        seen.add(real)
        found.append(WorkspaceFile(path=relative_posix(abs_path, workspace), abs_path=abs_path))

    for name in ROOT_FILES:
        candidate = workspace / name
        if _is_regular_file(candidate) and candidate.name in os.listdir(workspace):
            add(candidate)
    memory_dir = workspace / MEMORY_DIR
    if memory_dir.is_dir() and not memory_dir.is_symlink():
        for f in _walk_markdown(memory_dir):
            add(f)
    for entry in extra_paths:
        target = resolve_extra_path(entry, workspace)
        if target.is_symlink():
            issues.append(FileIssue(path=entry.path, reason="extra path is a symlink; skipped"))
            continue
        if target.is_dir():
            for f in _walk_markdown(target):
                rel = f.relative_to(target).as_posix()
                if entry.pattern is None or _glob_match(rel, entry.pattern):
                    add(f)
        elif target.is_file():
            if target.suffix.lower() == ".md":
                add(target)
            else:
                issues.append(FileIssue(path=entry.path, reason="extra path is not a .md file"))
        else:
            issues.append(FileIssue(path=entry.path, reason="extra path does not exist"))
    found.sort(key=lambda f: f.path)
    return found, issues


def file_date(path: str) -> tuple[int, int, int] | None:
    """``(y, m, d)`` of a dated memory file (``memory/**/YYYY-MM-DD[-slug].md``), else None."""
    parts = PurePosixPath(path).parts
    if len(parts) < 2 or parts[0] != MEMORY_DIR:
        return None
    m = _DATED.match(parts[-1])
    if not m:
        return None
    y, mo, d = (int(g) for g in m.groups())
    import datetime as _dt

    try:
        _dt.date(y, mo, d)
    except ValueError:
        return None
    return y, mo, d


def is_curated(path: str) -> bool:
    """True for root ``MEMORY.md``/``memory.md``/``USER.md`` (chunked per entry, evergreen)."""
    return path in ROOT_FILES


# ---------------------------------------------------------------------------------------
# Read path policy


def _is_memory_path(rel: str) -> bool:
    return rel in ROOT_FILES or rel.lower() == "dreams.md" or rel.startswith(MEMORY_DIR + "/")


def _check_no_symlinks(root: Path, rel_parts: tuple[str, ...]) -> None:
    current = root
    for i, part in enumerate(rel_parts):
        current = current / part
        try:
            st = os.lstat(current)
        except FileNotFoundError:
            return  # the caller reports a missing file as not_found
        if stat.S_ISLNK(st.st_mode):
            what = "file" if i == len(rel_parts) - 1 else "parent folder"
            raise PathPolicyError(f"{'/'.join(rel_parts)}: the {what} {part!r} is a symlink")


def resolve_read_path(
    workspace: Path, raw: str, extra_paths: Iterable[ExtraPath] = ()
) -> tuple[str, Path]:
    """Check a path against the read policy and return ``(relative path, absolute path)``.

    Allowed: ``MEMORY.md``, ``memory.md``, ``USER.md``, ``DREAMS.md``, anything under
    ``memory/``, and files under a configured extra path (matching its glob). Only ``.md``,
    no symlinks (file or parents), no escapes through ``..`` or absolute paths.

    Raises:
        PathPolicyError: with a message that says which rule the path broke.
    """
    if raw is None or not str(raw).strip():
        raise PathPolicyError(
            "path is required (for example 'MEMORY.md' or 'memory/2026-01-02.md')"
        )
    text = str(raw).strip().replace("\\", "/")
    while text.startswith("./"):
        text = text[2:]
    workspace = Path(os.path.abspath(workspace))
    candidate = Path(os.path.normpath(text if os.path.isabs(text) else workspace / text))
    rel = relative_posix(candidate, workspace)
    inside = not (rel == ".." or rel.startswith("../") or os.path.isabs(rel))
    if inside and _is_memory_path(rel):
        if not rel.lower().endswith(".md"):
            raise PathPolicyError(f"{rel}: only Markdown (.md) files can be read")
        _check_no_symlinks(workspace, PurePosixPath(rel).parts)
        return rel, candidate
    for entry in extra_paths:
        root = Path(os.path.normpath(resolve_extra_path(entry, workspace)))
        if root.is_symlink():
            continue
        if candidate == root and root.suffix.lower() == ".md":
            _check_no_symlinks(root.parent, (root.name,))
            return rel, candidate
        try:
            sub = candidate.relative_to(root)
        except ValueError:
            continue
        if not root.is_dir():
            continue
        sub_posix = sub.as_posix()
        if entry.pattern is not None and not _glob_match(sub_posix, entry.pattern):
            continue
        if not sub_posix.lower().endswith(".md"):
            raise PathPolicyError(f"{rel}: only Markdown (.md) files can be read")
        _check_no_symlinks(root, sub.parts)
        return rel, candidate
    if not inside:
        raise PathPolicyError(
            f"{text}: outside the workspace and not under a configured extra path"
        )
    raise PathPolicyError(
        f"{rel}: not a memory file (allowed: MEMORY.md, USER.md, memory/**/*.md and extra paths)"
    )


# ---------------------------------------------------------------------------------------
# Crash-safe writes


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically: a temp file in the same folder, fsync, rename.

    A failure (full disk, permissions) leaves the previous content untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        if path.exists():
            os.chmod(tmp, stat.S_IMODE(os.stat(path).st_mode))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def append_text(path: Path, text: str) -> int:
    """Append ``text`` to a Markdown file under a lock, never rewriting what was there.

    A newline separator is added when the file does not end with one. The new content is
    written to a temporary copy and renamed into place, so a crash or a full disk leaves
    either the old or the new file, never half of it. Symlinks are refused.

    Returns:
        The number of characters appended (separator included).
    """
    path = Path(path)
    if path.is_symlink():
        raise PathPolicyError(f"{path.name}: refusing to write through a symlink")
    path.parent.mkdir(parents=True, exist_ok=True)
    with exclusive_lock(path.parent):
        existing = ""
        if path.exists():
            existing = path.read_text(encoding="utf-8")
        sep = "" if not existing or existing.endswith("\n") else "\n"
        addition = sep + text if text.endswith("\n") else sep + text + "\n"
        atomic_write_text(path, existing + addition)
    return len(addition)
