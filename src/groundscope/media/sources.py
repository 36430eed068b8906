"""Where a medium's bytes come from: classification, decoding, local paths, identity.

A source string is classified without touching the disk: ``data:`` URI, ``http(s)://`` URL,
raw base64 (at least 64 characters of the standard base64 alphabet only; a path always has a
``.`` or some other character outside it), else a local path. Relative paths resolve against
``MediaRef.base_dir`` first, then the current directory (a resolution is remembered, so a
file shared by many records is looked up once). A local file is read only inside the allowed
media roots (``roots.py``), checked again at every read.

Audio and video are recognised by their bytes, as images are: a payload whose magic bytes
are no known audio (video) container, or an empty one, is refused whatever its name or hint.

http(s) URLs are passed through to the endpoint, except audio: the chat API has no audio
URL part, so the client fetches remote audio at send time (``client/fetch.py``) and
:func:`fetched_audio_format` checks the fetched bytes before they are encoded.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
import threading
from contextvars import ContextVar
from pathlib import Path
from typing import Literal
from urllib.parse import unquote_to_bytes

from groundscope.defaults import DEFAULT_MAX_BYTES
from groundscope.errors import MediaError
from groundscope.media.digest import content_id, remember_content
from groundscope.media.formats import (
    AUDIO_FORMATS,
    FORMAT_MIME,
    URL_RE,
    allowed_formats,
    data_uri_mime,
    ext_mime,
    norm_format,
    sniff_mime,
)
from groundscope.media.roots import confine, open_confined
from groundscope.redaction import redact_url
from groundscope.types import MediaRef, Modality

SourceKind = Literal["bytes", "data", "url", "base64", "path"]


# Possessive: "[...\s]+={0,2}\s*" backtracked through every trailing space, quadratic on a
# long cell of spaces that is not base64 after all.
_B64_RE = re.compile(r"[A-Za-z0-9+/\s]++(?:={1,2}\s*+)?")


def classify(source: str | bytes) -> SourceKind:
    if isinstance(source, bytes | bytearray):
        return "bytes"
    if len(source) < 256:  # paths and URLs: asked several times per sample, so remembered
        return _classify_short(source)
    return _classify_str(source)


@functools.lru_cache(maxsize=4096)  # a source is asked again within its sample's life
def _classify_short(source: str) -> SourceKind:
    return _classify_str(source)


def _classify_str(source: str) -> SourceKind:
    if source[:5].lower() == "data:":
        return "data"
    if URL_RE.match(source):
        return "url"
    if len(source) >= 64 and _B64_RE.fullmatch(source):
        return "base64"
    return "path"


def is_remote(ref: MediaRef) -> bool:
    """True for an http(s) URL: passed through to the endpoint (audio: fetched at send time
    by the client, then sent inline)."""
    return classify(ref.source) == "url"


def _b64decode(text: str, what: str) -> bytes:
    compact = "".join(text.split())
    compact += "=" * (-len(compact) % 4)
    try:
        return base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise MediaError(f"{what}: invalid base64 ({exc})") from None


def _parse_data_uri(uri: str) -> tuple[str | None, bytes]:
    head, sep, payload = uri.partition(",")
    if not sep:
        raise MediaError("malformed data URI: no ',' before the payload")
    params = [p.strip().lower() for p in head[5:].split(";")[1:]]
    if "base64" in params:
        return data_uri_mime(uri), _b64decode(payload, "data URI")
    return data_uri_mime(uri), unquote_to_bytes(payload)


def _cap(size: int, max_bytes: int, what: str) -> None:
    if size > max_bytes:
        raise MediaError(f"{what} is too big: {size} bytes > limit {max_bytes}")


_RESOLVED: dict[tuple[str, Path | None, str], str] = {}
_RESOLVED_MAX = 4096  # distinct files remembered; the whole table is dropped when full


def resolve_path(ref: MediaRef) -> Path:
    """The existing local file a path ref names; MediaError naming every place tried, or
    MediaRootError when it lies outside the allowed media roots (checked on every call).

    A found file is remembered (by source, base directory and current directory); a miss
    is looked up again next time.
    """
    found = _located(ref)
    confine(found, ref.base_dir, str(ref.source))
    return Path(found)


def _located(ref: MediaRef) -> str:
    """Where a path ref's file is, not yet checked against the roots (every read is, when
    it opens the file: ``roots.open_confined``). A ``str``, not a ``Path``: pathlib interns
    every part of every path it parses, a table that only grows (~2 MB at 10,000 images)."""
    if classify(ref.source) != "path":
        raise MediaError(f"{describe(ref)} is not a local file")
    cwd = os.getcwd()
    key = (str(ref.source), ref.base_dir, cwd)
    found = _RESOLVED.get(key)
    if found is None:
        found = _lookup(ref, cwd)
        if len(_RESOLVED) >= _RESOLVED_MAX:
            _RESOLVED.clear()
        _RESOLVED[key] = found
    return found


def _lookup(ref: MediaRef, cwd: str) -> str:
    text = str(ref.source)
    text = text[7:] if text.lower().startswith("file://") else text
    path = os.path.expanduser(text)  # os.path, not pathlib: this runs once per distinct file
    tried = [path] if os.path.isabs(path) else [os.path.join(cwd, path)]
    if not os.path.isabs(path) and ref.base_dir is not None:
        tried.insert(0, os.path.join(ref.base_dir, path))
    for candidate in tried:
        if os.path.isfile(candidate):
            return str(Path(candidate))  # Path's spelling of it (a temporary Path: see above)
        if os.path.exists(candidate):  # a directory, a FIFO, a device: never opened
            what = "a directory" if os.path.isdir(candidate) else "a FIFO, socket or device"
            raise MediaError(f"{ref.kind} {text!r} is not a regular file ({what}): {candidate}")
    where = ", ".join(str(Path(t)) for t in tried)
    raise MediaError(f"{ref.kind} file not found: {text!r} (tried {where})")


def read_raw(ref: MediaRef, max_bytes: int, head: int = -1, *,
             at_load: bool = False) -> tuple[bytes, str | None]:
    """Payload bytes plus the mime declared by a data URI or guessed from an extension.

    ``head`` > 0 reads only that many bytes of a local file (inline data is always decoded
    whole, which is what validates it). ``at_load``: a local file read whole as its record
    is loaded has its content id remembered (``digest.remember_content``), for
    :func:`fingerprint`, and its bytes kept for its send (:func:`load` with the version).
    """
    source, kind = ref.source, classify(ref.source)
    if isinstance(source, bytes | bytearray):
        _cap(len(source), max_bytes, f"inline {ref.kind}")
        return bytes(source), None
    if kind == "url":
        raise MediaError(f"{describe(ref)} is a remote URL: it is passed through, never fetched here")
    if kind in ("data", "base64"):
        _cap(len(source) * 3 // 4, max_bytes, f"inline {ref.kind}")
        if kind == "data":
            declared, data = _parse_data_uri(source)
            return data, declared
        return _b64decode(source, f"base64 {ref.kind}"), None
    path = _located(ref)
    try:
        opened = open_confined(path, ref.base_dir, str(ref.source))
        with open(opened.fd, "rb", buffering=0) as handle:  # one read of the known size, no buffer
            size = opened.info.st_size
            _cap(size, max_bytes, str(path))
            if size == 0:
                raise MediaError(f"{ref.source}: empty file (0 bytes)")
            data = handle.read(size if head < 0 else min(head, size))
    except OSError as exc:
        raise MediaError(f"cannot read {path}: {exc.strerror or exc}") from None
    declared = ext_mime(os.path.basename(path))
    if at_load and head < 0 and len(data) == opened.info.st_size:  # all of it, as looked at
        remember_content(opened.real, opened.info, data)
        _KEPT.keep(_version(opened.real, opened.info), data, declared)
    return data, declared


_SENDING: ContextVar[bool] = ContextVar("groundscope_media_sent_here", default=False)


def set_sending(on: bool) -> None:
    """Whether the records loaded in the current context are sent from this process (a local
    run's requests: the runner sets it). Only then does an image's check at load read the
    whole file, for its content id and its send (``images.check``); elsewhere (``--dry-run``,
    ``estimate``, a Ray driver, the simulator) it reads the header's head only."""
    _SENDING.set(on)


def sending() -> bool:
    """See :func:`set_sending`."""
    return _SENDING.get()


class _Kept:
    """Whole local files read as their records loaded, kept until their requests are built,
    so a file is read once, not again to be sent (~0.05 ms a 100 KB image, ``bench_ab.py``).
    Bounded: records load at most 16 ahead of a free model slot, and a record whose bytes
    are never taken (its answer reused on resume, a run stopped, a Ray driver: its workers
    send) must not pin them; the oldest go first past :data:`KEPT_FILES` files or
    :data:`KEPT_BYTES` bytes, and a file over a quarter of that is not kept. A file that
    went is read again at its send."""

    def __init__(self) -> None:
        self._files: dict[str, tuple[bytes, str | None]] = {}
        self._bytes = 0
        self._lock = threading.Lock()  # loads run on the event loop, and in threads too

    def keep(self, version: str, data: bytes, declared: str | None) -> None:
        if len(data) > KEPT_BYTES // 4:
            return
        with self._lock:
            if version in self._files:
                return
            self._files[version] = (data, declared)
            self._bytes += len(data)
            while len(self._files) > KEPT_FILES or self._bytes > KEPT_BYTES:
                self._bytes -= len(self._files.pop(next(iter(self._files)))[0])

    def take(self, version: str) -> tuple[bytes, str | None] | None:
        with self._lock:
            kept = self._files.pop(version, None)
            if kept is not None:
                self._bytes -= len(kept[0])
            return kept

    def clear(self) -> None:
        with self._lock:
            self._files.clear()
            self._bytes = 0


KEPT_FILES = 64
KEPT_BYTES = 16 * 1024 * 1024
_KEPT = _Kept()


def load(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES,
         version: str | None = None) -> tuple[bytes, str]:
    """Raw bytes and mime type of a local or inline medium (remote URLs are an error).
    ``version``: the local file's :func:`file_version`, looked up by the caller just now;
    bytes kept from its read at load (``read_raw(at_load=True)``) are taken, not read again."""
    kept = _KEPT.take(version) if version is not None else None
    if kept is not None and len(kept[0]) <= max_bytes:
        data, declared = kept
    else:
        data, declared = read_raw(ref, max_bytes)
    hint = FORMAT_MIME.get(norm_format(ref.format, ref.kind) or "")
    mime = sniff_mime(data) or hint or declared or "application/octet-stream"
    return data, mime


def exists(ref: MediaRef) -> bool:
    """False only for a local path that resolves to no file, or to one outside the allowed
    media roots (inline and remote: True)."""
    if classify(ref.source) != "path":
        return True
    try:
        resolve_path(ref)
    except MediaError:
        return False
    return True


def supported_format(ref: MediaRef, data: bytes) -> str:
    """The wire format of an audio/video payload: the hint, else its magic bytes, which
    must be those of a container of its kind whatever the hint says."""
    sniffed = _require_kind_bytes(ref, data)
    allowed = allowed_formats(ref.kind)
    fmt = norm_format(ref.format, ref.kind) or norm_format(sniffed, ref.kind)
    if fmt not in allowed:
        raise MediaError(
            f"unsupported {ref.kind} format {fmt!r} for {describe(ref)}; expected one of {', '.join(allowed)}"
        )
    return str(fmt)


def fetched_audio_format(ref: MediaRef, data: bytes) -> str:
    """The wire format of remote audio fetched at send time: the bytes must be audio by
    their magic numbers, and the format is what they are (a URL's name or a record's hint
    may be wrong); the record's hint is used only when the bytes name no format. Not one of
    :data:`AUDIO_FORMATS`: MediaError."""
    sniffed = _require_kind_bytes(ref, data)
    fmt = norm_format(sniffed, Modality.AUDIO) or norm_format(ref.format, Modality.AUDIO)
    if fmt not in AUDIO_FORMATS:
        raise MediaError(f"{describe(ref)}: unsupported audio format {fmt!r} (by its bytes); "
                         f"expected one of {', '.join(AUDIO_FORMATS)}")
    return str(fmt)


def _require_kind_bytes(ref: MediaRef, data: bytes) -> str:
    """The mime type ``data``'s magic bytes tell, if it is a known container of ``ref.kind``
    (audio: wav, mp3, flac, ogg, m4a; video: mp4, mov, avi, mpeg, webm, mkv); else MediaError."""
    if not data:
        raise MediaError(f"{describe(ref)}: empty {ref.kind} data (0 bytes)")
    mime = sniff_mime(data)
    if mime is not None and mime.startswith(f"{ref.kind}/"):
        return mime
    if mime is not None:
        found = f"its bytes are {mime}"
    elif all(b >= 0x20 or b in b"\t\n\r" for b in data[:64]):
        found = "its bytes are text"
    else:
        found = f"its bytes match no known {ref.kind} format"
    article = "an" if ref.kind is Modality.AUDIO else "a"
    raise MediaError(f"{describe(ref)}: not {article} {ref.kind} file ({found})")


def fingerprint(ref: MediaRef) -> str:
    """An identity for request hashing: path as written + size + content hash (computed
    once per file version, ``media/digest.py``: a copy with a new date is the same medium),
    URL, or a content hash of inline data."""
    kind = classify(ref.source)
    if kind == "path":
        try:  # hashed only inside the allowed roots (a file outside is a bad record anyway)
            real = confine(_located(ref), ref.base_dir, str(ref.source))
            ident = f"path:{ref.source}:{content_id(real, DEFAULT_MAX_BYTES)}"
        except (MediaError, OSError):
            ident = f"path:{ref.source}:missing"
    elif kind == "url":
        ident = f"url:{ref.source}"
    else:
        raw = ref.source if isinstance(ref.source, bytes) else ref.source.encode()
        ident = f"sha256:{hashlib.sha256(raw).hexdigest()}"
    extras = [
        f"format={ref.format}" if ref.format else "",
        f"detail={ref.detail}" if ref.detail else "",
        f"fps={ref.fps!r}" if ref.fps is not None else "",
    ]
    return "|".join([str(ref.kind), ident, *[e for e in extras if e]])


def file_version(ref: MediaRef) -> str | None:
    """A local file's version, not read: its real path, size, mtime and inode (None: not a
    local file inside the roots). For what one process remembers of a file (its header
    checked, its base64); :func:`fingerprint` (content hashed) is for what is saved."""
    if classify(ref.source) != "path":
        return None
    try:
        real = confine(_located(ref), ref.base_dir, str(ref.source))
        info = os.stat(real)
    except (MediaError, OSError):
        return None
    return _version(real, info)


def _version(real: str, info: os.stat_result) -> str:
    return f"{real}|{info.st_size}|{info.st_mtime_ns}|{info.st_ino}"


def describe(ref: MediaRef) -> str:
    """Short, stable, secret-free text for outputs; never the inline payload."""
    kind = classify(ref.source)
    if kind == "path":
        return str(ref.source)
    if kind == "url":
        return redact_url(str(ref.source))
    declared: str | None = None
    try:
        if kind == "data":
            declared, data = _parse_data_uri(str(ref.source))
        elif kind == "base64":
            data = _b64decode(str(ref.source), "base64")
        else:
            data = bytes(ref.source)  # type: ignore[arg-type]
    except MediaError:
        data = str(ref.source).encode()
    mime = declared or sniff_mime(data) or FORMAT_MIME.get(norm_format(ref.format, ref.kind) or "")
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{ref.kind}:sha256:{digest}" + (f" ({mime})" if mime else "")
