"""Where a medium's bytes come from: classification, decoding, local paths, identity.

A source string is classified without touching the disk: ``data:`` URI, ``http(s)://`` URL,
raw base64 (at least 64 characters of the standard base64 alphabet only; a path always has a
``.`` or some other character outside it), else a local path. Relative paths resolve against
``MediaRef.base_dir`` first, then the current directory (a resolution is remembered, so a
file shared by many records is looked up once).
"""

from __future__ import annotations

import base64
import binascii
import functools
import hashlib
import os
import re
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qsl, unquote_to_bytes, urlsplit, urlunsplit

from groundscope.errors import MediaError
from groundscope.media.formats import (
    _FORMAT_MIME,
    _URL_RE,
    AUDIO_FORMATS,
    VIDEO_FORMATS,
    _data_uri_mime,
    _ext_mime,
    _norm_format,
    sniff_mime,
)
from groundscope.types import MediaRef, Modality

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


SourceKind = Literal["bytes", "data", "url", "base64", "path"]


# Possessive: "[...\s]+={0,2}\s*" backtracked through every trailing space, quadratic on a
# long cell of spaces that is not base64 after all.
_B64_RE = re.compile(r"[A-Za-z0-9+/\s]++(?:={1,2}\s*+)?")


_SECRET_KEY_RE = re.compile(r"sig|token|key|secret|pass|auth|credential", re.IGNORECASE)


def _classify(source: str | bytes) -> SourceKind:
    if isinstance(source, bytes | bytearray):
        return "bytes"
    if len(source) < 256:  # paths and URLs: asked several times per sample, so remembered
        return _classify_short(source)
    return _classify_str(source)


@functools.lru_cache(maxsize=16384)
def _classify_short(source: str) -> SourceKind:
    return _classify_str(source)


def _classify_str(source: str) -> SourceKind:
    if source[:5].lower() == "data:":
        return "data"
    if _URL_RE.match(source):
        return "url"
    if len(source) >= 64 and _B64_RE.fullmatch(source):
        return "base64"
    return "path"


def is_remote(ref: MediaRef) -> bool:
    """True for an http(s) URL: passed through to the endpoint, never fetched by us."""
    return _classify(ref.source) == "url"


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
        return _data_uri_mime(uri), _b64decode(payload, "data URI")
    return _data_uri_mime(uri), unquote_to_bytes(payload)


def _cap(size: int, max_bytes: int, what: str) -> None:
    if size > max_bytes:
        raise MediaError(f"{what} is too big: {size} bytes > limit {max_bytes}")


_RESOLVED: dict[tuple[str, Path | None, str], Path] = {}
_RESOLVED_MAX = 8192  # distinct files remembered; the whole table is dropped when full


def resolve_path(ref: MediaRef) -> Path:
    """The existing local file a path ref names; MediaError naming every place tried.

    A found file is remembered (by source, base directory and current directory); a miss
    is looked up again next time.
    """
    if _classify(ref.source) != "path":
        raise MediaError(f"{describe(ref)} is not a local file")
    cwd = os.getcwd()
    key = (str(ref.source), ref.base_dir, cwd)
    found = _RESOLVED.get(key)
    if found is not None:
        return found
    text = str(ref.source)
    text = text[7:] if text.lower().startswith("file://") else text
    path = os.path.expanduser(text)  # os.path, not pathlib: this runs once per distinct file
    tried = [path] if os.path.isabs(path) else [os.path.join(cwd, path)]
    if not os.path.isabs(path) and ref.base_dir is not None:
        tried.insert(0, os.path.join(ref.base_dir, path))
    for candidate in tried:
        if os.path.isfile(candidate):
            if len(_RESOLVED) >= _RESOLVED_MAX:
                _RESOLVED.clear()
            found = _RESOLVED[key] = Path(candidate)
            return found
    where = ", ".join(str(Path(t)) for t in tried)
    raise MediaError(f"{ref.kind} file not found: {text!r} (tried {where})")


def _raw(ref: MediaRef, max_bytes: int, head: int = -1) -> tuple[bytes, str | None]:
    """Payload bytes plus the mime declared by a data URI or guessed from an extension.

    ``head`` > 0 reads only that many bytes of a local file (inline data is always decoded
    whole, which is what validates it).
    """
    source, kind = ref.source, _classify(ref.source)
    if isinstance(source, bytes | bytearray):
        _cap(len(source), max_bytes, f"inline {ref.kind}")
        return bytes(source), None
    if kind == "url":
        raise MediaError(f"{describe(ref)} is a remote URL: it is passed through, never fetched")
    if kind in ("data", "base64"):
        _cap(len(source) * 3 // 4, max_bytes, f"inline {ref.kind}")
        if kind == "data":
            declared, data = _parse_data_uri(source)
            return data, declared
        return _b64decode(source, f"base64 {ref.kind}"), None
    path = resolve_path(ref)
    try:
        size = os.stat(path).st_size
        _cap(size, max_bytes, str(path))
        with open(path, "rb", buffering=0) as handle:  # one read of the known size, no buffer
            return handle.read(size if head < 0 else min(head, size)), _ext_mime(path.name)
    except OSError as exc:
        raise MediaError(f"cannot read {path}: {exc.strerror or exc}") from None


def load(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes, str]:
    """Raw bytes and mime type of a local or inline medium (remote URLs are an error)."""
    data, declared = _raw(ref, max_bytes)
    hint = _FORMAT_MIME.get(_norm_format(ref.format, ref.kind) or "")
    mime = sniff_mime(data) or hint or declared or "application/octet-stream"
    return data, mime


def exists(ref: MediaRef) -> bool:
    """False only for a local path that resolves to no file (inline and remote: True)."""
    if _classify(ref.source) != "path":
        return True
    try:
        resolve_path(ref)
    except MediaError:
        return False
    return True


def _media_format(ref: MediaRef, data: bytes | None) -> str | None:
    """Audio/video format: hint, magic bytes, data-URI mime, then extension."""
    candidates = [_norm_format(ref.format, ref.kind)]
    if data is not None:
        candidates.append(_norm_format(sniff_mime(data)))
    kind = _classify(ref.source)
    if kind == "data":
        candidates.append(_norm_format(_data_uri_mime(str(ref.source))))
    if kind in ("path", "url"):
        candidates.append(_norm_format(_ext_mime(str(ref.source))))
    return next((c for c in candidates if c), None)


def _supported_format(ref: MediaRef, data: bytes | None) -> str:
    allowed = AUDIO_FORMATS if ref.kind is Modality.AUDIO else VIDEO_FORMATS
    fmt = _media_format(ref, data)
    if fmt is None:
        raise MediaError(
            f"cannot tell the {ref.kind} format of {describe(ref)}; give a format hint ({', '.join(allowed)})"
        )
    if fmt not in allowed:
        raise MediaError(
            f"unsupported {ref.kind} format {fmt!r} for {describe(ref)}; expected one of {', '.join(allowed)}"
        )
    return fmt


def fingerprint(ref: MediaRef) -> str:
    """A cheap identity for request hashing: path + size + mtime, URL, or a content hash."""
    kind = _classify(ref.source)
    if kind == "path":
        try:
            stat = resolve_path(ref).stat()
            ident = f"path:{ref.source}:{stat.st_size}:{stat.st_mtime_ns}"
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
    ]
    return "|".join([str(ref.kind), ident, *[e for e in extras if e]])


def describe(ref: MediaRef) -> str:
    """Short, stable, secret-free text for outputs; never the inline payload."""
    kind = _classify(ref.source)
    if kind == "path":
        return str(ref.source)
    if kind == "url":
        return _redact_url(str(ref.source))
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
    mime = declared or sniff_mime(data) or _FORMAT_MIME.get(_norm_format(ref.format, ref.kind) or "")
    digest = hashlib.sha256(data).hexdigest()[:16]
    return f"{ref.kind}:sha256:{digest}" + (f" ({mime})" if mime else "")


def _redact_url(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)[-1]
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(_SECRET_KEY_RE.search(k) for k, _ in pairs):
        query = "&".join(f"{k}=REDACTED" if _SECRET_KEY_RE.search(k) else f"{k}={v}" for k, v in pairs)
    if netloc == parts.netloc and query == parts.query:
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))
