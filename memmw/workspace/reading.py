"""The one note reader: every read of a note's text goes through here, within one cap table.

Indexing and ``memory_get`` read a whole note (:func:`read_markdown`: refused past
``CAPS.index``, binary or invalid UTF-8 refused, byte order mark dropped); prompts read a
note's first bytes (:func:`read_prompt_bytes`: regular files only, never through a
symlink). :data:`CAPS` is the one table of how much of a note any reader takes.
"""

from __future__ import annotations

import hashlib
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from memmw.errors import FileReadError
from memmw.workspace.files import MAX_NOTE_BYTES


@dataclass(frozen=True)
class ReadCaps:
    """How many bytes of a note each reader takes (the one table).

    Attributes:
        index: Indexing, ``memory_get`` and fact extraction: a larger note is refused
            with ``FileReadError`` (a write never grows a note past it either).
        prompt: The session bootstrap and working memory: a larger file is not loaded.
        startup: The startup context of ``/new``: each recent note is read up to this.
    """

    index: int = MAX_NOTE_BYTES
    prompt: int = 2 * 1024 * 1024
    startup: int = 16_384


#: The caps every note reader uses.
CAPS = ReadCaps()


def read_markdown(path: Path) -> tuple[str, str, float, int]:
    """Read a Markdown file: ``(text, sha256 of bytes, mtime, size)``.

    Raises:
        FileReadError: binary content, invalid UTF-8, too large or unreadable.
    """
    data, digest, mtime, size = read_note_bytes(path)
    return decode_note(data), digest, mtime, size


def read_note_bytes(path: Path) -> tuple[bytes, str, float, int]:
    """Read a Markdown file's bytes: ``(data, sha256 of data, mtime, len(data))``.

    Raises:
        FileReadError: too large (``CAPS.index``) or unreadable.
    """
    cap = CAPS.index
    try:
        # O_NONBLOCK: a file swapped for a FIFO after discovery must not hang the sync.
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise FileReadError("not a regular file")
            if st.st_size > cap:
                raise FileReadError(f"larger than {cap // (1024 * 1024)} MiB")
            # Read what fstat promises (plus a byte to see growth) rather than asking for
            # the size limit: a buffer that large per file cost more than hashing it.
            parts: list[bytes] = []
            left = cap + 1
            while left > 0:
                part = os.read(fd, min(left, st.st_size + 1 if not parts else 1 << 20))
                if not part:
                    break
                parts.append(part)
                left -= len(part)
            data = b"".join(parts)
        finally:
            os.close(fd)
        if len(data) > cap:
            raise FileReadError(f"larger than {cap // (1024 * 1024)} MiB")
    except OSError as exc:
        raise FileReadError(f"unreadable: {exc.strerror or exc}") from exc
    # The size of the bytes hashed (a note appended to during the read is longer than
    # fstat said): forget checks that a note still begins with exactly these bytes.
    return data, hashlib.sha256(data).hexdigest(), st.st_mtime, len(data)


def decode_note(data: bytes) -> str:
    """The text of a Markdown file's bytes, without a byte order mark.

    Raises:
        FileReadError: binary content or invalid UTF-8.
    """
    if b"\x00" in data:
        raise FileReadError("binary content (NUL bytes)")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise FileReadError(f"not valid UTF-8 (byte {exc.start})") from exc
    return text.removeprefix("\ufeff")


def read_prompt_bytes(path: Path, max_bytes: int | None = None) -> tuple[bytes, bool] | None:
    """The first ``max_bytes`` of a note for a prompt and whether it was longer; None for
    a symlink or a non-regular file (never read).

    Raises:
        OSError: the file cannot be read.
    """
    if not stat.S_ISREG(os.lstat(path).st_mode):
        return None
    with path.open("rb") as fh:
        data = fh.read(max_bytes + 1) if max_bytes is not None else fh.read()
    more = max_bytes is not None and len(data) > max_bytes
    return (data[:max_bytes] if more else data), more
