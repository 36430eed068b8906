"""The run directory's lock: one process writes a run at a time.

``flock`` on ``<run_dir>/.groundscope.lock``, which holds the owner's pid for the error
message. Stores of one process share the lock (counted); the system drops it with the last
descriptor, so a process that dies leaves nothing to clean up.
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from pathlib import Path

from groundscope.errors import StoreError

LOCK_FILE = ".groundscope.lock"
_HELD: dict[str, list[int]] = {}  # real path of a locked run directory -> [fd, holders]
_HELD_GUARD = threading.Lock()


def lock_dir(run_dir: Path) -> bool:
    """Hold ``run_dir``'s lock for one more store of this process; False if there is no lock
    to take (not POSIX, or a read-only directory: nothing will be appended to it either)."""
    try:
        import fcntl
    except ImportError:
        return False
    key = os.path.realpath(run_dir)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is not None:
            held[1] += 1
            return True
        path = os.path.join(key, LOCK_FILE)
        flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
        try:  # a run directory is untrusted: never follow a planted symlink or open a FIFO
            fd = os.open(path, flags, 0o644)
        except OSError as exc:
            if os.path.islink(path) or exc.errno in (errno.ELOOP, errno.EISDIR):
                raise StoreError(f"{path}: not a regular file (a symbolic link or a "
                                 "directory); remove it and try again") from None
            return False
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise StoreError(f"{path}: not a regular file; remove it and try again")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            who = f" (pid {holder})" if holder.isdigit() else ""
            raise StoreError(f"{run_dir}: in use by another groundscope process{who}; "
                             "let it finish (or stop it), then try again") from None
        try:  # the pid is only for the message above: a full disk must not stop the run here
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass
        _HELD[key] = [fd, 1]
        return True


def unlock_dir(run_dir: Path) -> None:
    key = os.path.realpath(run_dir)
    with _HELD_GUARD:
        held = _HELD.get(key)
        if held is None:
            return
        held[1] -= 1
        if held[1] <= 0:
            del _HELD[key]
            os.close(held[0])  # the system drops the flock with its last descriptor
