"""Media formats: magic-byte sniffing, format hints, mime types."""

from __future__ import annotations

import mimetypes
import os
import re
from urllib.parse import urlsplit

from groundscope.errors import MediaError
from groundscope.media.settings import FRAMED_VIDEO, TRANSCODED_AUDIO, media_settings
from groundscope.types import Modality

AUDIO_FORMATS = ("wav", "mp3")


VIDEO_FORMATS = ("mp4", "mpeg", "mov", "avi")


FORMAT_MIME = {
    "jpeg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp",
    "bmp": "image/bmp", "tiff": "image/tiff", "wav": "audio/wav", "mp3": "audio/mpeg",
    "flac": "audio/flac", "ogg": "audio/ogg", "mp4": "video/mp4", "mov": "video/quicktime",
    "avi": "video/x-msvideo", "mpeg": "video/mpeg", "webm": "video/webm", "m4a": "audio/mp4",
    "mkv": "video/x-matroska",
}  # fmt: skip


_ALIASES = {
    "jpg": "jpeg", "tif": "tiff", "mpg": "mpeg", "mpga": "mp3", "x-mp3": "mp3", "wave": "wav",
    "x-wav": "wav", "vnd.wave": "wav", "quicktime": "mov", "x-msvideo": "avi", "msvideo": "avi",
    "m4v": "mp4", "x-matroska": "mkv", "matroska": "mkv", "x-m4a": "m4a",
}  # fmt: skip


URL_RE = re.compile(r"https?://", re.IGNORECASE)


def norm_format(fmt: str | None, kind: Modality | None = None) -> str | None:
    if not fmt:
        return None
    fmt = fmt.split(";")[0].strip().lower().lstrip(".")
    if fmt.startswith("audio/"):
        kind = Modality.AUDIO
    fmt = fmt.rsplit("/", 1)[-1]  # a mime type given as a hint
    fmt = _ALIASES.get(fmt, fmt)
    if kind is Modality.AUDIO and fmt in ("mpeg", "mp4"):  # audio/mpeg, audio/mp4
        return "mp3" if fmt == "mpeg" else "m4a"
    return fmt or None


def allowed_formats(kind: Modality) -> tuple[str, ...]:
    """The audio / video formats a record may hold under the media settings in force: the
    API's own, plus those converted before sending (``audio_transcode``: flac, ogg, m4a;
    ``video_frames``: mkv, webm). Images: ``()`` (any Pillow reads)."""
    settings = media_settings()
    if kind is Modality.AUDIO:
        return AUDIO_FORMATS + (TRANSCODED_AUDIO if settings.audio_transcode else ())
    if kind is Modality.VIDEO:
        return VIDEO_FORMATS + (FRAMED_VIDEO if settings.video_frames else ())
    return ()


def check_format(kind: Modality, fmt: str | None) -> str | None:
    """Normalise a format hint (``.MP3`` -> ``mp3``); unsupported audio/video -> MediaError."""
    norm = norm_format(fmt, kind)
    allowed = allowed_formats(kind)
    if norm and allowed and norm not in allowed:
        raise MediaError(f"unsupported {kind} format {fmt!r}; expected one of {', '.join(allowed)}")
    return norm


def sniff_mime(data: bytes) -> str | None:
    """The mime type told by a payload's magic bytes, or None."""
    head = data[:16]
    riff = head[8:12] if head[:4] == b"RIFF" else b""
    # an ISO-BMFF / QuickTime file opens with a box: a 4-byte size (small: high byte 0), a type
    box = head[4:8] if head[:1] == b"\x00" else b""
    brand = head[8:12]
    table: list[tuple[bool, str]] = [
        (head[:3] == b"\xff\xd8\xff", "image/jpeg"),
        (head[:8] == b"\x89PNG\r\n\x1a\n", "image/png"),
        (head[:6] in (b"GIF87a", b"GIF89a"), "image/gif"),
        (riff == b"WEBP", "image/webp"),
        (head[:2] == b"BM", "image/bmp"),
        (head[:4] in (b"II*\x00", b"MM\x00*"), "image/tiff"),
        (riff == b"WAVE", "audio/wav"),
        (riff == b"AVI ", "video/x-msvideo"),
        (_is_id3(head) or _is_mp3_frame(head), "audio/mpeg"),
        (head[:4] == b"fLaC", "audio/flac"),
        (head[:4] == b"OggS", "audio/ogg"),
        (box == b"ftyp" and brand in (b"M4A ", b"M4B "), "audio/mp4"),
        (box == b"ftyp" and brand == b"qt  ", "video/quicktime"),
        (box == b"ftyp", "video/mp4"),
        (box in (b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot"), "video/quicktime"),
        (head[:4] in (b"\x00\x00\x01\xba", b"\x00\x00\x01\xb3"), "video/mpeg"),
        (head[:4] == b"\x1a\x45\xdf\xa3" and b"matroska" in data[:64], "video/x-matroska"),
        (head[:4] == b"\x1a\x45\xdf\xa3", "video/webm"),
    ]
    return next((mime for hit, mime in table if hit), None)


def _is_id3(head: bytes) -> bool:
    # an ID3v2 tag: "ID3", major version 2..4, then a four-byte syncsafe size (high bits clear)
    return (len(head) >= 10 and head[:3] == b"ID3" and head[3] in (2, 3, 4)
            and all(b < 0x80 for b in head[6:10]))


def _is_mp3_frame(head: bytes) -> bool:
    # MPEG audio frame sync (11 bits set) with layer bits 01 = Layer III
    return len(head) >= 2 and head[0] == 0xFF and head[1] & 0xE0 == 0xE0 and head[1] & 0x06 == 2


def ext_mime(name: str) -> str | None:
    path = urlsplit(name).path if URL_RE.match(name) else name
    fmt = norm_format(os.path.splitext(path)[1])
    return FORMAT_MIME.get(fmt or "") or mimetypes.guess_type(path, strict=False)[0]


def data_uri_mime(uri: str) -> str | None:
    head = uri[5:].split(",", 1)[0]
    return head.split(";", 1)[0].strip().lower() or None
