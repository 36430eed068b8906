"""A local file's content identity, for request hashing: size + SHA-256 of its bytes.

A resumed run reuses a finished sample when its request hash is unchanged, so a medium must
enter the hash by what it *is*, not by when it was written: a dataset copied elsewhere, or
re-extracted from an archive, has new modification times but the same bytes. Hashing is
done once per file version: digests are remembered by ``(real path, size, mtime_ns,
inode)``, so an unchanged file is not read again. Only regular files of a size that can be
sent are read (a FIFO or a device is identified by its kind; a larger file by size and date).

Cost: one hash of each distinct file version per process, from the bytes read at load
when the image's header is checked there. SHA-256 (128 bits of it kept), which this
machine's CPU runs in hardware: 0.074 ms a 100 KB image against BLAKE2b's 0.208 ms
(``timeit``, 2026-12-06; BLAKE2b was ~7 % of a sample's client CPU at 0 ms).

Versions to 2026-12-06 identified a file by BLAKE2b-128 instead (``<size>:<hex>``), and the
request hashes of the answers they saved depend on it: inside :func:`earlier_content_ids` a content id
is computed so, for resume to recognise a request saved by such a version
(``pipeline``), asking nothing again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

_CHUNK = 1 << 20
_REMEMBERED = 4096  # distinct file versions (~400 bytes each: at most ~1.6 MB)


_EARLIER: ContextVar[bool] = ContextVar("groundscope_earlier_content_ids", default=False)


@contextlib.contextmanager
def earlier_content_ids() -> Iterator[None]:
    """Inside, :func:`content_id` is what versions to 2026-12-06 computed (BLAKE2b-128)."""
    token = _EARLIER.set(True)
    try:
        yield
    finally:
        _EARLIER.reset(token)


def _ident(size: int, hashed: Any, earlier: bool) -> str:
    """The id of a file of ``size`` bytes from its ``hashlib`` object (:func:`_hasher`)."""
    return f"{size}:{hashed.hexdigest()}" if earlier else f"{size}:sha256:{hashed.hexdigest()[:32]}"


def _hasher(earlier: bool, data: bytes = b"") -> Any:
    return hashlib.blake2b(data, digest_size=16) if earlier else hashlib.sha256(data)


def content_id(path: str | os.PathLike[str], max_bytes: int) -> str:
    """``<size>:sha256:<hex, 128 bits>`` of a regular file's bytes (``OSError`` if
    unreadable; inside :func:`earlier_content_ids`, ``<size>:<blake2b-128 hex>``).
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
    ...     with earlier_content_ids():
    ...         earlier = content_id(a, 1024)
    ...     earlier != content_id(a, 1024) and earlier.startswith("10:")
    True
    True
    """
    real = os.fspath(path)
    info = os.stat(real)
    if not stat.S_ISREG(info.st_mode):
        return f"special:{stat.S_IFMT(info.st_mode):o}"
    if info.st_size > max_bytes:
        return f"{info.st_size}:mtime:{info.st_mtime_ns}"
    return _digest(real, info.st_size, info.st_mtime_ns, info.st_ino)


# (real, size, mtime_ns, inode, earlier) -> id
_DIGESTS: dict[tuple[str, int, int, int, bool], str] = {}


def _digest(real: str, size: int, mtime_ns: int, inode: int) -> str:
    earlier = _EARLIER.get()
    key = (real, size, mtime_ns, inode, earlier)
    known = _DIGESTS.get(key)
    if known is not None:
        return known
    h = _hasher(earlier)
    left = size  # a file that grows meanwhile is hashed as it was when looked at
    with open(real, "rb") as fh:
        while left > 0:
            chunk = fh.read(min(_CHUNK, left))
            if not chunk:
                break
            h.update(chunk)
            left -= len(chunk)
    return _remember(key, _ident(size, h, earlier))


def remember_content(real: str, info: os.stat_result, data: bytes) -> None:
    """Record the content id of the file at ``real`` (described by ``info``) from ``data``,
    its whole bytes, read by the caller for another purpose: :func:`content_id` of that
    version then needs no read of its own. The check of an image's header at load reads the
    whole file for this (``images.check``): one read where there were two, ~0.05 ms a
    100 KB image (``bench_ab.py``)."""
    key = (real, info.st_size, info.st_mtime_ns, info.st_ino, False)
    if len(data) == info.st_size and key not in _DIGESTS:
        _remember(key, _ident(info.st_size, _hasher(False, data), earlier=False))


def _remember(key: tuple[str, int, int, int, bool], ident: str) -> str:
    if len(_DIGESTS) >= _REMEMBERED:  # the whole table is dropped when full
        _DIGESTS.clear()
    _DIGESTS[key] = ident
    return ident
