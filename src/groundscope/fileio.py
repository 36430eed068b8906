"""Whole-file writes that are never torn, and file-system errors as one line.

``atomic_write`` writes a temporary file in the target's directory, fsyncs it and renames it
over the target (``os.replace``), so a reader sees the old file or the new one, never a
0-byte or half-written one, whatever kills the writer (a full disk, a crash, SIGKILL). A
failed write removes its temporary file and raises ``StoreError`` naming the path and the
system's reason (e.g. ``no space left on device``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

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
        with tmp.open("wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise write_error(path, exc, hint) from None
    fsync_dir(path.parent)
