"""Media: a ``MediaRef`` -> bytes + mime, validation, and the wire encoding of one medium.

The only module that reads media bytes or produces base64. Everything else handles
``MediaRef`` values, which name a medium without holding its decoded payload.

A source string is classified without touching the disk: ``data:`` URI, ``http(s)://`` URL,
raw base64 (at least 64 characters of the standard base64 alphabet only; a path always has a
``.`` or some other character outside it), else a local path. Relative paths resolve against
``MediaRef.base_dir`` first, then the current directory.

Mime types come from magic bytes first (a ``.jpg`` that holds a PNG is sent as PNG), then the
format hint, the data-URI mime and the file extension. The audio/video *format* on the wire
follows the hint first, then magic bytes, data-URI mime and extension.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import mimetypes
import os
import re
import warnings
from collections.abc import Mapping
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qsl, unquote_to_bytes, urlsplit, urlunsplit

from groundscope.errors import MediaError
from groundscope.types import MediaRef, Modality

__all__ = [
    "AUDIO_FORMATS", "DEFAULT_MAX_BYTES", "DEFAULT_MAX_PIXELS", "VIDEO_FORMATS", "check",
    "check_format", "describe", "exists", "fingerprint", "is_remote", "load", "max_pixels",
    "media_from_value", "resolve_path", "set_max_pixels", "sniff_mime", "wire_part",
]  # fmt: skip

DEFAULT_MAX_BYTES = 64 * 1024 * 1024
DEFAULT_MAX_PIXELS = 89_478_485  # Pillow's Image.MAX_IMAGE_PIXELS (its decompression-bomb limit)
_HEADER_BYTES = 1024 * 1024  # enough of an image file for Pillow to parse its header
_MAX_PIXELS: ContextVar[int] = ContextVar("groundscope_max_image_pixels", default=DEFAULT_MAX_PIXELS)
AUDIO_FORMATS = ("wav", "mp3")
VIDEO_FORMATS = ("mp4", "mpeg", "mov", "avi")

SourceKind = Literal["bytes", "data", "url", "base64", "path"]

_FORMAT_MIME = {
    "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
    "bmp": "image/bmp", "tiff": "image/tiff", "wav": "audio/wav", "mp3": "audio/mpeg",
    "flac": "audio/flac", "ogg": "audio/ogg", "mp4": "video/mp4", "mov": "video/quicktime",
    "avi": "video/x-msvideo", "mpeg": "video/mpeg", "webm": "video/webm",
}  # fmt: skip
_ALIASES = {
    "jpg": "jpeg", "tif": "tiff", "mpg": "mpeg", "mpga": "mp3", "x-mp3": "mp3", "wave": "wav",
    "x-wav": "wav", "vnd.wave": "wav", "quicktime": "mov", "x-msvideo": "avi", "msvideo": "avi",
    "m4v": "mp4",
}  # fmt: skip
_B64_RE = re.compile(r"[A-Za-z0-9+/\s]+={0,2}\s*")
_URL_RE = re.compile(r"https?://", re.IGNORECASE)
_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")
_SECRET_KEY_RE = re.compile(r"sig|token|key|secret|pass|auth|credential", re.IGNORECASE)


# --- classification and formats ------------------------------------------------------------


def _classify(source: str | bytes) -> SourceKind:
    if isinstance(source, bytes | bytearray):
        return "bytes"
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


def _norm_format(fmt: str | None, kind: Modality | None = None) -> str | None:
    if not fmt:
        return None
    fmt = fmt.split(";")[0].strip().lower().lstrip(".")
    if fmt.startswith("audio/"):
        kind = Modality.AUDIO
    fmt = fmt.rsplit("/", 1)[-1]  # a mime type given as a hint
    fmt = _ALIASES.get(fmt, fmt)
    return "mp3" if kind is Modality.AUDIO and fmt == "mpeg" else fmt or None


def check_format(kind: Modality, fmt: str | None) -> str | None:
    """Normalise a format hint (``.MP3`` -> ``mp3``); unsupported audio/video -> MediaError."""
    norm = _norm_format(fmt, kind)
    allowed = {Modality.AUDIO: AUDIO_FORMATS, Modality.VIDEO: VIDEO_FORMATS}.get(kind)
    if norm and allowed and norm not in allowed:
        raise MediaError(f"unsupported {kind} format {fmt!r}; expected one of {', '.join(allowed)}")
    return norm


def sniff_mime(data: bytes) -> str | None:
    """The mime type told by a payload's magic bytes, or None."""
    head = data[:16]
    riff = head[8:12] if head[:4] == b"RIFF" else b""
    box = head[4:8]
    table: list[tuple[bool, str]] = [
        (head[:3] == b"\xff\xd8\xff", "image/jpeg"),
        (head[:8] == b"\x89PNG\r\n\x1a\n", "image/png"),
        (head[:6] in (b"GIF87a", b"GIF89a"), "image/gif"),
        (riff == b"WEBP", "image/webp"),
        (head[:2] == b"BM", "image/bmp"),
        (head[:4] in (b"II*\x00", b"MM\x00*"), "image/tiff"),
        (riff == b"WAVE", "audio/wav"),
        (riff == b"AVI ", "video/x-msvideo"),
        (head[:3] == b"ID3" or _is_mp3_frame(head), "audio/mpeg"),
        (head[:4] == b"fLaC", "audio/flac"),
        (head[:4] == b"OggS", "audio/ogg"),
        (box == b"ftyp" and head[8:12] == b"qt  ", "video/quicktime"),
        (box == b"ftyp", "video/mp4"),
        (box in (b"moov", b"mdat", b"wide", b"free"), "video/quicktime"),
        (head[:4] in (b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3"), "video/mpeg"),
        (head[:4] == b"\x1a\x45\xdf\xa3", "video/webm"),
    ]
    return next((mime for hit, mime in table if hit), None)


def _is_mp3_frame(head: bytes) -> bool:
    # MPEG audio frame sync (11 bits set) with layer bits 01 = Layer III
    return len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 == 2


def _ext_mime(name: str) -> str | None:
    path = urlsplit(name).path if _URL_RE.match(name) else name
    fmt = _norm_format(os.path.splitext(path)[1])
    return _FORMAT_MIME.get(fmt or "") or mimetypes.guess_type(path, strict=False)[0]


def _data_uri_mime(uri: str) -> str | None:
    head = uri[5:].split(",", 1)[0]
    return head.split(";", 1)[0].strip().lower() or None


# --- decoding ------------------------------------------------------------------------------


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


def resolve_path(ref: MediaRef) -> Path:
    """The existing local file a path ref names; MediaError naming every place tried."""
    if _classify(ref.source) != "path":
        raise MediaError(f"{describe(ref)} is not a local file")
    text = str(ref.source)
    text = text[7:] if text.lower().startswith("file://") else text
    path = Path(os.path.expanduser(text))
    tried = [path] if path.is_absolute() else [Path.cwd() / path]
    if not path.is_absolute() and ref.base_dir is not None:
        tried.insert(0, ref.base_dir / path)
    for candidate in tried:
        if candidate.is_file():
            return candidate
    where = ", ".join(str(t) for t in tried)
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
        _cap(path.stat().st_size, max_bytes, str(path))
        with path.open("rb") as handle:
            return handle.read(head), _ext_mime(path.name)
    except OSError as exc:
        raise MediaError(f"cannot read {path}: {exc.strerror or exc}") from None


def load(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[bytes, str]:
    """Raw bytes and mime type of a local or inline medium (remote URLs are an error)."""
    data, declared = _raw(ref, max_bytes)
    hint = _FORMAT_MIME.get(_norm_format(ref.format, ref.kind) or "")
    mime = sniff_mime(data) or hint or declared or "application/octet-stream"
    return data, mime


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


# --- the wire ------------------------------------------------------------------------------


def wire_part(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES) -> dict[str, Any]:
    """The OpenAI chat content part for one medium (base64 made here, at send time).

    Remote audio has no ``input_audio`` form, so it goes out as ``audio_url`` (the vLLM
    extension); every other remote medium passes its URL through untouched.
    """
    remote = is_remote(ref)
    if ref.kind is Modality.IMAGE:
        url = str(ref.source) if remote else _image_data_url(ref, max_bytes)
        image_url: dict[str, str] = {"url": url}
        if ref.detail:
            image_url["detail"] = ref.detail
        return {"type": "image_url", "image_url": image_url}
    if ref.kind is Modality.AUDIO:
        if remote:
            return {"type": "audio_url", "audio_url": {"url": str(ref.source)}}
        data, _ = _raw(ref, max_bytes)
        fmt = _supported_format(ref, data)
        payload = base64.b64encode(data).decode("ascii")
        return {"type": "input_audio", "input_audio": {"data": payload, "format": fmt}}
    if remote:
        return {"type": "video_url", "video_url": {"url": str(ref.source)}}
    data, _ = _raw(ref, max_bytes)
    mime = _FORMAT_MIME[_supported_format(ref, data)]
    url = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "video_url", "video_url": {"url": url}}


def _image_data_url(ref: MediaRef, max_bytes: int) -> str:
    data, mime = load(ref, max_bytes=max_bytes)
    if not mime.startswith("image/"):
        raise MediaError(f"{describe(ref)} is not an image (content looks like {mime})")
    _open_image(data, ref).close()  # header only: the pixel cap, no decoding
    return f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"


# --- validation ----------------------------------------------------------------------------


def check(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES, decode: bool = True) -> None:
    """Validate a medium without sending it: readable, decodable, supported format.

    Images are verified with Pillow (truncated files fail) and held to the pixel cap
    (:func:`max_pixels`); ``decode=False`` reads only the image header (cheap: an
    unreadable header and the pixel cap are caught, a truncated body is not). Audio and
    video only have their header sniffed. Remote URLs are checked for a format hint only.
    """
    if is_remote(ref):
        check_format(ref.kind, ref.format)
        return
    if ref.kind is Modality.IMAGE:
        if decode:
            _verify_image(load(ref, max_bytes=max_bytes)[0], describe(ref))
        else:  # Pillow needs only the head of a file to parse the header
            _open_image(_raw(ref, max_bytes, head=_HEADER_BYTES)[0], ref).close()
        return
    check_format(ref.kind, ref.format)
    _supported_format(ref, _raw(ref, max_bytes, head=64)[0])


def max_pixels() -> int:
    """The image pixel cap in force (``TaskConfig.max_image_pixels``; Pillow's by default)."""
    return _MAX_PIXELS.get()


def set_max_pixels(limit: int) -> None:
    """Set the image pixel cap for the current context (the runner sets it per run)."""
    if limit < 1:
        raise ValueError("the pixel cap must be >= 1")
    _MAX_PIXELS.set(limit)


def _open_image(data: bytes, what: MediaRef | str) -> Any:
    """Pillow's lazy ``Image`` of ``data`` (header parsed, nothing decoded), pixel cap applied.

    A decompression bomb fails here, before any pixel is decoded. ``what`` names the image
    in an error (a ref is described only then).
    """
    from PIL import Image  # lazy: only validation and PIL values need Pillow

    limit = _MAX_PIXELS.get()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as exc:  # beyond twice Pillow's own limit
        pixels = re.search(r"\d+", str(exc))
        raise _too_many_pixels(what, pixels.group(0) if pixels else "too many", limit) from None
    except Image.UnidentifiedImageError:
        raise _unreadable(what, "unknown format or corrupt header") from None
    except Exception as exc:  # Pillow raises many types for unreadable data
        raise _unreadable(what, str(exc)) from None
    width, height = img.size
    if width * height > limit:
        img.close()
        raise _too_many_pixels(what, f"{width}x{height} = {width * height}", limit)
    return img


def _label(what: MediaRef | str) -> str:
    return describe(what) if isinstance(what, MediaRef) else what


def _unreadable(what: MediaRef | str, why: str) -> MediaError:
    return MediaError(f"{_label(what)}: not a readable image ({why})")


def _too_many_pixels(what: MediaRef | str, pixels: str, limit: int) -> MediaError:
    return MediaError(f"{_label(what)}: image of {pixels} pixels is over the limit of {limit} "
                      "(max_image_pixels; a decompression bomb?)")


def _verify_image(data: bytes, what: str) -> None:
    from PIL import Image  # lazy: only validation and PIL values need Pillow

    _open_image(data, what).close()
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
        with Image.open(io.BytesIO(data)) as img:
            if img.format == "JPEG":
                img.draft("RGB", (64, 64))  # decode the whole stream at 1/8 scale: cheap
            img.load()
    except Image.DecompressionBombError as exc:
        raise MediaError(f"{what}: image too large to decode safely ({exc})") from None
    except Exception as exc:  # Pillow raises many types for broken files
        raise MediaError(f"{what}: not a readable image ({exc})") from None


def exists(ref: MediaRef) -> bool:
    """False only for a local path that resolves to no file (inline and remote: True)."""
    if _classify(ref.source) != "path":
        return True
    try:
        resolve_path(ref)
    except MediaError:
        return False
    return True


# --- identity and description --------------------------------------------------------------


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


# --- column values -> MediaRef -------------------------------------------------------------


def media_from_value(
    value: Any,
    kind: Modality | str,
    *,
    format: str | None = None,
    base_dir: Path | None = None,
    detail: str | None = None,
) -> MediaRef:
    """Normalise one dataset value into a MediaRef (no file is read).

    Accepts a path / URL / data URI / base64 string, ``bytes``, a ``pathlib.Path``, a
    parquet ``{"bytes", "path"}`` dict (also ``url`` / ``data`` / ``<kind>`` keys, as in
    OpenAI parts) and objects with ``.bytes`` / ``.path`` attributes (HF feature-like).
    Inline payloads are checked to decode; unusable values raise MediaError.
    """
    kind = Modality(kind)
    fmt = check_format(kind, format)
    if isinstance(value, MediaRef):
        return value
    if isinstance(value, Mapping):
        source, dict_fmt = _from_mapping(value, kind)
        fmt = fmt or check_format(kind, dict_fmt)
    else:
        source = _from_object(value, kind)
    ref = MediaRef(kind=kind, source=source, format=fmt, detail=detail, base_dir=base_dir)
    if _classify(source) in ("data", "base64"):
        _raw(ref, DEFAULT_MAX_BYTES)  # decodes: invalid base64 or an oversize payload fails here
    return ref


def _from_string(text: str, kind: Modality) -> str:
    text = text.strip()
    if not text:
        raise MediaError(f"empty {kind} value")
    scheme = _SCHEME_RE.match(text)
    if scheme and scheme.group(1).lower() not in ("http", "https", "file"):
        raise MediaError(f"unsupported URL scheme {scheme.group(1)!r}: only http(s) URLs are sent")
    return text


def _from_object(value: Any, kind: Modality) -> str | bytes:
    if isinstance(value, str):
        return _from_string(value, kind)
    if isinstance(value, bytes | bytearray | memoryview):
        if not len(value):
            raise MediaError(f"empty {kind} bytes")
        return bytes(value)
    if isinstance(value, os.PathLike):
        return _from_string(os.fspath(value), kind)
    attrs = {k: getattr(value, k) for k in ("bytes", "path") if getattr(value, k, None)}
    if attrs:
        return _from_mapping(attrs, kind)[0]
    raise MediaError(f"unusable {kind} value of type {type(value).__name__}")


def _from_mapping(value: Mapping[str, Any], kind: Modality) -> tuple[str | bytes, str | None]:
    hint = value.get("format") if isinstance(value.get("format"), str) else None
    payload = value.get("bytes")
    if isinstance(payload, bytes | bytearray | memoryview) and len(payload):
        return bytes(payload), hint
    for key in ("bytes", "path", "url", "data", str(kind)):
        candidate = value.get(key)
        if isinstance(candidate, str) and candidate.strip():
            return _from_string(candidate, kind), hint
    keys = ", ".join(sorted(map(str, value))) or "none"
    raise MediaError(f"expected a dict with 'path', 'bytes', 'url' or 'data' (keys: {keys})")
