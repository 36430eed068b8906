"""Where local media may be read from: the allowed roots, the confinement check, the open.

A local medium is read only when its real path (``..`` and every symlink resolved) lies
inside an allowed root: the folder of the dataset file that names it (``MediaRef.base_dir``)
or one of the roots in force. A run puts in force the working directory, each dataset's
folder and ``media_roots`` (``--media-root DIR``), and records them in its ``config.json``;
``groundscope score`` / ``report`` put those recorded roots back in force (never the working
directory of the later command). Outside a run, the working directory is the one root in force.

Confinement holds on every read, not once at load: :func:`open_confined` resolves the path,
checks it, opens the real path without following a final symlink, and requires the opened
file to be the very file at that real path (the kernel's name for the descriptor, else
resolved again and compared by inode), so a symlink swapped between load and send, or
between the check and the open, is caught. Only regular files are read: a FIFO (opened
without blocking), a device or a directory is refused.
"""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import NamedTuple

from groundscope.errors import MediaError, MediaRootError

_ROOTS: ContextVar[tuple[str, ...] | None] = ContextVar("groundscope_media_roots", default=None)

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))

ROOTS_HELP = "the dataset's folder and the working directory"


def real_dir(path: str | os.PathLike[str]) -> str:
    """The absolute real path of ``path`` (``~`` expanded, symlinks and ``..`` resolved)."""
    return _real(os.fspath(path), os.getcwd())


@functools.lru_cache(maxsize=1024)
def _real(path: str, cwd: str) -> str:  # cwd: a relative path resolves against it
    return os.path.realpath(os.path.join(cwd, os.path.expanduser(path)))


def set_media_roots(dirs: Iterable[str | os.PathLike[str]]) -> tuple[str, ...]:
    """Put ``dirs`` in force as the media roots of the current context; their real paths."""
    roots = tuple(dict.fromkeys(real_dir(d) for d in dirs))
    _ROOTS.set(roots)
    return roots


@contextmanager
def media_roots_in_force(dirs: Iterable[str | os.PathLike[str]]) -> Iterator[tuple[str, ...]]:
    """``dirs`` in force as the media roots inside the ``with`` block only."""
    token = _ROOTS.set(tuple(dict.fromkeys(real_dir(d) for d in dirs)))
    try:
        yield _ROOTS.get() or ()
    finally:
        _ROOTS.reset(token)


def chosen_media_roots() -> tuple[str, ...]:
    """The roots this process put in force (``--media-root`` given now, or a run's own),
    without the working-directory default: ``score`` / ``report`` add them to a run's
    honoured recorded roots."""
    return _ROOTS.get() or ()


def media_roots() -> tuple[str, ...]:
    """The media roots in force (real paths): those a run set, else the working directory."""
    roots = _ROOTS.get()
    return roots if roots is not None else (real_dir(os.getcwd()),)


def _inside(real: str, root: str) -> bool:
    real, root = os.path.normcase(real), os.path.normcase(root)
    return real == root or real.startswith(root if root.endswith(os.sep) else root + os.sep)


_DIRS: dict[str, str] = {}  # a folder, absolute as written -> its real path
_DIRS_MAX = 4096  # distinct folders remembered; the whole table is dropped when full


def real_file(path: str) -> str:
    """``os.path.realpath(path)`` for a file, its folder resolved once per process: the
    file itself is ``lstat``-ed every time (a symlink, or a path with ``..``, is resolved in
    full). A folder swapped for a link since is caught where the file is read
    (:func:`open_confined` compares the kernel's name of the opened file with this path).
    2,000 images in one folder: one ``realpath`` of the folder, not 2,000 of each file."""
    if ".." in path.split(os.sep):
        return os.path.realpath(path)
    head, tail = os.path.split(path if os.path.isabs(path) else os.path.abspath(path))
    try:
        if tail in ("", ".") or stat.S_ISLNK(os.lstat(path).st_mode):
            return os.path.realpath(path)
    except OSError:
        return os.path.realpath(path)
    real_head = _DIRS.get(head)
    if real_head is None:
        real_head = os.path.realpath(head)
        if len(_DIRS) >= _DIRS_MAX:
            _DIRS.clear()
        _DIRS[head] = real_head
    return os.path.join(real_head, tail)


def confine(path: str | os.PathLike[str], base_dir: Path | None, shown: str) -> str:
    """The real path of ``path`` if it lies inside an allowed root, else MediaRootError.

    ``shown`` is how the dataset names the medium (used in the message).
    """
    real = real_file(os.fspath(path))
    roots = ((real_dir(base_dir),) if base_dir is not None else ()) + media_roots()
    if any(_inside(real, root) for root in roots):
        return real
    where = shown if shown == real else f"{shown} (resolves to {real})"
    raise MediaRootError(
        f"{where} is outside the allowed media roots ({ROOTS_HELP}); add --media-root "
        f"{os.path.dirname(real)} (TaskConfig media_roots) to allow it"
    )


class Opened(NamedTuple):
    """A descriptor from :func:`open_confined`, with the real path it was checked at and its
    ``fstat``."""

    fd: int
    real: str
    info: os.stat_result


def open_confined(path: str | os.PathLike[str], base_dir: Path | None, shown: str) -> Opened:
    """A read-only descriptor of the regular file ``path``, checked to lie inside an allowed
    root at the moment it is opened (see the module docstring). OSError when it cannot be
    opened; MediaError when it is outside, not a regular file, or was swapped meanwhile."""
    real = confine(path, base_dir, shown)
    fd = os.open(real, _OPEN_FLAGS)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise MediaError(f"{shown} is not a regular file")
        if not _is_opened_file(fd, info, real):
            raise MediaError(f"{shown} changed while it was being opened (a swapped symlink?)")
    except BaseException:
        os.close(fd)
        raise
    return Opened(fd, real, info)


def _is_opened_file(fd: int, info: os.stat_result, real: str) -> bool:
    """Whether descriptor ``fd`` is the file at ``real`` (no folder on the way was swapped
    for a link between the check and the open): the kernel's name for it where there is
    /proc (one call), else ``real`` resolved again and compared by device and inode."""
    try:
        return os.readlink(f"/proc/self/fd/{fd}") == real
    except OSError:
        return os.path.realpath(real) == real and os.path.samestat(info, os.stat(real))
