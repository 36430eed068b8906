"""Whole-file writes that are never torn, and file-system errors as one line.

``atomic_write`` writes a temporary file in the target's directory, fsyncs it and renames it
over the target (``os.replace``), so a reader sees the old file or the new one, never a
0-byte or half-written one, whatever kills the writer (a full disk, a crash, SIGKILL). A
failed write removes its temporary file and raises ``StoreError`` naming the path and the
system's reason (e.g. ``no space left on device``).
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from groundscope.errors import StoreError


def os_problem(exc: OSError) -> str:
    """The system's reason, lower-case: ``no space left on device``, ``permission denied``.

    >>> import errno
    >>> os_problem(OSError(errno.ENOSPC, "No space left on device"))
    'no space left on device'
    """
    text = exc.strerror or (os.strerror(exc.errno) if exc.errno else str(exc))
    return text[:1].lower() + text[1:]


def write_error(path: Path | str, exc: OSError, hint: str = "") -> StoreError:
    """A one-line ``StoreError`` for a failed write: ``path: reason[; hint]``."""
    return StoreError(f"{path}: {os_problem(exc)}" + (f"; {hint}" if hint else ""))


def fsync_dir(directory: Path) -> None:
    """Make a rename in ``directory`` durable (best effort: not every system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def atomic_write(path: Path, data: bytes, *, hint: str = "") -> None:
    """Replace ``path`` with ``data`` atomically (temporary file, fsync, rename).

    On failure the temporary file is removed, ``path`` is left as it was and a
    ``StoreError`` (``path: reason; hint``) is raised.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with create_fresh(tmp) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise write_error(path, exc, hint) from None
    fsync_dir(path.parent)


def open_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> BinaryIO:
    """Open a file of a run directory (untrusted input): never through a symbolic link
    (``O_NOFOLLOW``), never a FIFO or a device (opened non-blocking, then ``fstat``-checked).
    ``flags`` is ``os.O_RDONLY`` (read, ``"rb"``) or includes ``os.O_APPEND`` (``"ab"``).
    A refused file is a one-line ``StoreError``; other failures stay ``OSError``."""
    fd = open_regular_fd(path, flags, mode)
    return os.fdopen(fd, "ab" if flags & os.O_APPEND else "rb")


def open_regular_fd(path: Path, flags: int, mode: int = 0o644) -> int:
    """:func:`open_regular`'s descriptor (blocking again once checked)."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP or os.path.islink(path):
            raise StoreError(f"{path}: is a symbolic link; a run directory's files are "
                             "never read or written through one") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise StoreError(f"{path}: not a regular file (a FIFO, device or directory); refused")
    os.set_blocking(fd, True)
    return fd


def check_no_symlink_dirs(base: Path, path: Path) -> None:
    """Refuse ``path`` if a directory between ``base`` (trusted) and it is a symbolic link
    (a run directory's ``predictions/<model>`` linked elsewhere); missing parts are fine."""
    try:
        rel = path.parent.relative_to(base)
    except ValueError:
        return
    current = base
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise StoreError(f"{current}: is a symbolic link; a run directory's files are "
                             "never read or written through one")


def create_fresh(path: Path) -> BinaryIO:
    """A new empty file at ``path`` for writing: whatever was there (a planted symlink, a
    temporary file left by a killed run) is removed first, and the file is created with
    ``O_EXCL | O_NOFOLLOW`` so nothing at that name is ever written through."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    return os.fdopen(fd, "wb")


def read_regular(path: Path, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of a run directory's file opened as :func:`open_regular`
    does (the caller says what more than ``cap`` bytes means)."""
    chunks: list[bytes] = []
    left = cap + 1
    with open_regular(path) as fh:  # a block at a time: read(n) would allocate n bytes at once
        while left > 0 and (chunk := fh.read(min(left, 1 << 20))):
            chunks.append(chunk)
            left -= len(chunk)
    return b"".join(chunks)


def within(path: str, root: str) -> bool:
    """Whether the real path ``path`` is ``root`` or lies under it (both already real).

    >>> within("/a/b", "/a"), within("/ab", "/a"), within("/a", "/a/")
    (True, False, True)
    """
    return path == root.rstrip(os.sep) or path.startswith(root.rstrip(os.sep) + os.sep)
