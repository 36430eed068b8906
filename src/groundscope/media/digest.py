"""A local file's content identity, for request hashing: size + BLAKE2b of its bytes.

A resumed run reuses a finished sample when its request hash is unchanged, so a medium must
enter the hash by what it *is*, not by when it was written: a dataset copied elsewhere, or
re-extracted from an archive, has new modification times but the same bytes. Hashing is
done once per file version: digests are remembered by ``(real path, size, mtime_ns,
inode)``, so an unchanged file is not read again. Only regular files of a size that can be
sent are read (a FIFO or a device is identified by its kind; a larger file by size and date).

Cost: one read and hash of each distinct file per process (~300 MB/s measured on the shared
2-core test machine, ~1 ms for a 300 KB image); the same bytes are read to be sent anyway.
"""

from __future__ import annotations

import hashlib
import os
import stat

_CHUNK = 1 << 20
_REMEMBERED = 4096  # distinct file versions (~400 bytes each: at most ~1.6 MB)


def content_id(path: str | os.PathLike[str], max_bytes: int) -> str:
    """``<size>:<blake2b-128 hex>`` of a regular file's bytes (``OSError`` if unreadable).
    ``path`` is already resolved (``media.roots.confine`` returns it so): it is not resolved
    again, one ``realpath`` fewer per request hashed (~0.1 ms of the ~2 ms client CPU a
    sample costs, measured with cProfile on bench_throughput's 2,000-image dataset).

    A file over ``max_bytes`` (which can never be sent) is not read: it is identified by
    its size and modification time, as before.

    >>> import tempfile, pathlib
    >>> with tempfile.TemporaryDirectory() as d:
    ...     a, b = pathlib.Path(d, "a"), pathlib.Path(d, "b")
    ...     _ = a.write_bytes(b"same bytes"); _ = b.write_bytes(b"same bytes")
    ...     os.utime(b, (0, 0))
    ...     content_id(a, 1024) == content_id(b, 1024) != content_id(a, 4)
    True
    """
    real = os.fspath(path)
    info = os.stat(real)
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode):o}"
    if info.st_size > max_bytes:
        return f"{info.st_size}:mtime:{info.st_mtime_ns}"
    return _digest(real, info.st_size, info.st_mtime_ns, info.st_ino)


_DIGESTS: dict[tuple[str, int, int, int], str] = {}  # (real, size, mtime_ns, inode) -> id


def _digest(real: str, size: int, mtime_ns: int, inode: int) -> str:
    key = (real, size, mtime_ns, inode)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = hashlib.blake2b(digest_size=16)
    left = size  # a file that grows meanwhile is hashed as it was when looked at
    with open(real, "rb") as fh:
        while left > 0:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return _remember(key, f"{size}:{h.hexdigest()}")


def remember_content(real: str, info: os.stat_result, data: bytes) -> None:
    """Record the content id of the file at ``real`` (described by ``info``) from ``data``,
    its whole bytes, read by the caller for another purpose: :func:`content_id` of that
    version then needs no read of its own. The check of an image's header at load reads the
    whole file for this (``images.check``): one read where there were two, ~0.05 ms a
    100 KB image (``bench_ab.py``)."""
    key = (real, info.st_size, info.st_mtime_ns, info.st_ino)
    if len(data) == info.st_size and key not in _DIGESTS:
        _remember(key, f"{info.st_size}:{hashlib.blake2b(data, digest_size=16).hexdigest()}")


def _remember(key: tuple[str, int, int, int], ident: str) -> str:
    if len(_DIGESTS) >= _REMEMBERED:  # the whole table is dropped when full
        _DIGESTS.clear()
    _DIGESTS[key] = ident
    return ident
