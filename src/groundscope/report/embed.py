"""Media for the HTML report: small JPEG thumbnails and short audio clips as data URIs.

Saved samples name their media as the dataset wrote them (a path relative to the dataset
file, a redacted URL, or ``image:sha256:...`` for inline bytes). A path is resolved against
the directory of the sample's ``origin`` file, then the current directory (as in
``media.resolve_path``) and read only inside the media roots in force (``write_html`` puts
the run's recorded roots in force); anything that cannot be read, or lies outside those
roots, is shown by its name, never fatal.

Size is bounded three ways: images become thumbnails of at most ``THUMB_PX`` pixels a side
(a video, its first frame's, decoded by PyAV under the pixel cap; without PyAV, its path);
identical files (by content hash) are embedded once; and once ``budget`` bytes of data URIs
are embedded, further media are shown by name only. Remote URLs are never fetched.

Thumbnails are the costly part (decoding a photo takes ~2 ms), so a run makes the first
ones its end-of-run page will show in a background thread while it waits on the model
(:class:`ThumbnailPrefetch`; Pillow decodes without holding the interpreter lock); the page
takes them from there, by file identity (path, size, mtime), and makes any others itself.
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import io
import os
import queue
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from groundscope import media
from groundscope.errors import MediaError, MediaRootError
from groundscope.media.decode import first_frame
from groundscope.types import MediaRef, Modality

THUMB_PX = 128
AUDIO_MAX_BYTES = 256 * 1024
# a video's first frame is ~10 ms or more of decoding: each counts as this much of the budget
# (the end-of-run page decodes at most 8; ``groundscope report`` about a thousand)
VIDEO_CHARGE = 16 * 1024
SOURCE_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_BUDGET = 16 * 1024 * 1024
# The page written at the end of a run embeds fewer previews (making a thumbnail costs about
# as much CPU as sending a sample); ``groundscope report RUN_DIR`` rebuilds it with more.
END_OF_RUN_BUDGET = 128 * 1024
END_OF_RUN_SAMPLES = 1000  # and so many samples at most, so its memory does not grow with N
# ``groundscope report``'s page: the first so many samples. A sample held while the page is
# built costs ~10 KB: a whole 200,000-row run took 2.4 GB (benchmarks/bench_merge.py)
REPORT_SAMPLES = 10_000
OUTSIDE_ROOTS = "not embedded: outside the run's allowed media roots"
_NOT_A_PATH = re.compile(r"^(?:https?://|data:|(?:image|audio|video):sha256:)", re.IGNORECASE)


@dataclass
class MediaTable:
    """The media of every sample, each distinct one once; data URIs shared by content hash.

    ``ref(kind, name, base_dir)`` returns an index into ``entries``; an entry is
    ``{"kind", "name", "blob"?: index into blobs, "note"?: why there is no preview}``.
    """

    budget: int = DEFAULT_BUDGET
    entries: list[dict[str, Any]] = field(default_factory=list)
    blobs: list[str] = field(default_factory=list)
    used: int = 0
    _index: dict[tuple[str, str, str], int] = field(default_factory=dict)
    _by_file: dict[Path, tuple[int | None, str | None]] = field(default_factory=dict)
    _by_hash: dict[str, int] = field(default_factory=dict)

    def ref(self, kind: str, name: str, base_dir: Path | None) -> int:
        key = (kind, name, str(base_dir) if base_dir else "")
        found = self._index.get(key)
        if found is not None:
            return found
        entry: dict[str, Any] = {"kind": kind, "name": name}
        blob, note = self._preview(kind, name, base_dir)
        if blob is not None:
            entry["blob"] = blob
        if note:
            entry["note"] = note
        self._index[key] = len(self.entries)
        self.entries.append(entry)
        return self._index[key]

    def _preview(self, kind: str, name: str, base_dir: Path | None) -> tuple[int | None, str | None]:
        if _NOT_A_PATH.match(name):
            return None, "not embedded (inline data or remote URL)" if kind != "video" else None
        try:
            ref = MediaRef(Modality(kind), name, base_dir=base_dir)
            path = media.resolve_path(ref)
        except MediaRootError:
            return None, OUTSIDE_ROOTS
        except (MediaError, ValueError, OSError):
            return None, "file not found"
        cached = self._by_file.get(path)
        if cached is None:
            cached = self._by_file[path] = self._embed(ref, path)
        return cached

    def _embed(self, ref: MediaRef, path: Path) -> tuple[int | None, str | None]:
        kind = ref.kind.value
        try:
            size = path.stat().st_size
            if kind == "video" and (size > SOURCE_MAX_BYTES or not media.have_pyav()):
                why = "too big to preview" if size > SOURCE_MAX_BYTES else "no PyAV for a thumbnail"
                return None, f"{_size(size)}, {why}"
            if kind == "audio" and size > AUDIO_MAX_BYTES:
                return None, f"{_size(size)}, too big to embed"
            if size > SOURCE_MAX_BYTES:
                return None, f"{_size(size)}, too big to preview"
            if self.used >= self.budget:  # not even read: a page must stay openable
                return None, ("not embedded: the preview budget is used up "
                              "(`groundscope report RUN_DIR` embeds more)")
            data = media.load(ref, max_bytes=SOURCE_MAX_BYTES)[0]  # confined to the roots
        except FileNotFoundError:  # gone since it was resolved
            return None, "file not found"
        except OSError as exc:
            return None, f"unreadable: {exc.strerror or exc}"
        except MediaRootError:  # swapped for a link to outside since it was resolved
            return None, OUTSIDE_ROOTS
        except MediaError as exc:
            return None, f"unreadable: {exc}"
        digest = hashlib.sha256(data).hexdigest()
        if digest in self._by_hash:
            return self._by_hash[digest], None
        if kind == "audio":
            uri = _audio_uri(data)
        elif kind == "video":  # decoding costs: charged as VIDEO_CHARGE at least, even failed
            uri = _video_uri(data, path.name)
            self.used += max(0, VIDEO_CHARGE - len(uri or ""))
        else:
            uri = _prefetched(path, data)
            if uri is None:
                uri = _thumbnail_uri(data)
        if uri is None:
            return None, f"not a readable {kind}"
        self.used += len(uri)
        self._by_hash[digest] = len(self.blobs)
        self.blobs.append(uri)
        return self._by_hash[digest], None


def _size(n: int) -> str:
    return f"{n / 1024 / 1024:.1f} MB" if n >= 1024 * 1024 else f"{n / 1024:.0f} KB"


_FileKey = tuple[str, int, int]  # (path, size, mtime_ns)
_PREFETCHED: dict[_FileKey, str] = {}
_PREFETCHED_GUARD = threading.Lock()


def _file_key(path: Path | str) -> _FileKey | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (os.path.realpath(path), info.st_size, info.st_mtime_ns)


def _prefetched(path: Path, data: bytes) -> str | None:
    """A thumbnail made ahead of time for this very file (same size and mtime), if any."""
    key = _file_key(path)
    if key is None or key[1] != len(data):
        return None
    with _PREFETCHED_GUARD:
        return _PREFETCHED.get(key)


class ThumbnailPrefetch:
    """Makes thumbnails of offered local images in a daemon thread until ``budget`` bytes of
    data URIs are made (at most ``max_files`` files are taken). The thread reads under the
    media roots in force where the first image was offered. ``close`` waits for the thread;
    the thumbnails stay for the page, until the next prefetch starts."""

    def __init__(self, budget: int = END_OF_RUN_BUDGET, *, max_files: int = 256) -> None:
        self.budget, self.max_files = budget, max_files
        self.made = 0  # bytes of data URIs made so far
        self._offered: set[Path] = set()
        self._queue: queue.SimpleQueue[tuple[MediaRef, Path] | None] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        with _PREFETCHED_GUARD:
            _PREFETCHED.clear()

    @property
    def wanted(self) -> bool:
        """Whether more files are still taken."""
        return len(self._offered) < self.max_files and self.made < self.budget

    def offer(self, ref: MediaRef) -> None:
        """Take a local image (inline, remote, missing or out-of-roots ones are ignored)."""
        if not self.wanted or ref.kind is not Modality.IMAGE or media.is_remote(ref):
            return
        try:
            path = media.resolve_path(ref)
        except MediaError:
            return
        if path in self._offered:
            return
        self._offered.add(path)
        if self._thread is None:  # the thread runs in this context: the same media roots
            self._thread = threading.Thread(target=contextvars.copy_context().run,
                                            args=(self._work,), name="groundscope-thumbnails",
                                            daemon=True)
            self._thread.start()
        self._queue.put((ref, path))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            self._thread = None

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            if self.made >= self.budget:
                continue  # drain the queue: the page has enough
            ref, path = item
            key = _file_key(path)
            if key is None or key[1] > SOURCE_MAX_BYTES:
                continue
            try:
                data = media.load(ref, max_bytes=SOURCE_MAX_BYTES)[0]  # confined to the roots
            except MediaError:
                continue
            uri = _thumbnail_uri(data)
            if uri is not None and len(data) == key[1] and _file_key(path) == key:
                with _PREFETCHED_GUARD:
                    _PREFETCHED[key] = uri
                self.made += len(uri)


def _thumbnail_uri(data: bytes) -> str | None:
    """A JPEG thumbnail (at most ``THUMB_PX`` a side) as a data URI; None if unreadable."""
    from PIL import Image

    try:  # decoded reduced, under the pixel cap and the process's decode budget
        img = media.small_image(data, "thumbnail", THUMB_PX)
        if img.mode in ("RGBA", "LA", "P"):
            rgba = img.convert("RGBA")
            flat = Image.new("RGB", rgba.size, (255, 255, 255))
            flat.paste(rgba, mask=rgba.getchannel("A"))
        else:
            flat = img.convert("RGB")
        buf = io.BytesIO()
        flat.save(buf, "JPEG", quality=60, optimize=True)
    except Exception:  # Pillow raises many types for broken or unsupported files
        return None
    return "data:image/jpeg;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _video_uri(data: bytes, name: str) -> str | None:
    """A video's first frame as a JPEG thumbnail data URI (PyAV, bounded by the pixel cap);
    None if it cannot be decoded."""
    try:
        jpeg = first_frame(data, name, max_pixels=media.max_pixels(), side=THUMB_PX)
    except MediaError:
        return None
    return "data:image/jpeg;base64," + base64.b64encode(jpeg).decode("ascii")


def _audio_uri(data: bytes) -> str | None:
    mime = media.sniff_mime(data)
    if mime is None or not mime.startswith("audio/"):
        return None
    return f"data:{mime};base64," + base64.b64encode(data).decode("ascii")
