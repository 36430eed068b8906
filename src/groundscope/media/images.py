"""Image validation: Pillow header parsing, the pixel cap (decompression bombs), decoding."""

from __future__ import annotations

import io
import re
import warnings
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from groundscope.defaults import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from groundscope.errors import MediaError
from groundscope.media.budget import DECODE_BUDGET, pixel_bytes
from groundscope.media.decode import probe_audio, probe_video
from groundscope.media.formats import check_format, sniff_mime
from groundscope.media.settings import TRANSCODED_AUDIO, media_settings
from groundscope.media.sources import (
    describe,
    file_version,
    is_remote,
    read_raw,
    sending,
    supported_format,
)
from groundscope.types import MediaRef, Modality

_HEAD_BYTES = 64 * 1024  # the head read first: holds the header of nearly every image
_HEADER_BYTES = 1024 * 1024  # enough of an image file for Pillow to parse its header


_MAX_PIXELS: ContextVar[int] = ContextVar("groundscope_max_image_pixels", default=DEFAULT_MAX_PIXELS)


_CHECKED: dict[str, None] = {}
_CHECKED_MAX = 8192  # distinct files remembered; the whole table is dropped when full


def _checked_key(version: str | None) -> str | None:
    """The identity under which a local image's header check is remembered, from its
    :func:`file_version` (None: inline)."""
    return None if version is None else f"{version}|px={_MAX_PIXELS.get()}"


def _remember_checked(key: str | None) -> None:
    if key is not None:
        if len(_CHECKED) >= _CHECKED_MAX:
            _CHECKED.clear()
        _CHECKED[key] = None


def header_checked(version: str | None) -> bool:
    """True when the local file of this :func:`file_version` (same path, size and mtime)
    passed :func:`check` under the pixel cap in force, so sending it need not parse its
    header again."""
    key = _checked_key(version)
    return key is not None and key in _CHECKED


def max_pixels() -> int:
    """The image pixel cap in force (``TaskConfig.max_image_pixels``; Pillow's by default)."""
    return _MAX_PIXELS.get()


def set_max_pixels(limit: int) -> None:
    """Set the image pixel cap for the current context (the runner sets it per run)."""
    if limit < 1:
        raise ValueError("the pixel cap must be >= 1")
    _MAX_PIXELS.set(limit)


# Pillow tries only the plugin the magic bytes name (unknown magic: every plugin, as before).
_PIL_FORMATS = {"image/jpeg": ("JPEG",), "image/png": ("PNG",), "image/gif": ("GIF",),
                "image/webp": ("WEBP",), "image/bmp": ("BMP",), "image/tiff": ("TIFF",)}


def open_image(data: bytes, what: MediaRef | str) -> Any:
    """Pillow's lazy ``Image`` of ``data`` (header parsed, nothing decoded), pixel cap applied.

    A decompression bomb fails here, before any pixel is decoded. ``what`` names the image
    in an error (a ref is described only then).
    """
    from PIL import Image  # lazy: only validation and PIL values need Pillow

    limit = _MAX_PIXELS.get()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            img = Image.open(io.BytesIO(data), formats=_PIL_FORMATS.get(sniff_mime(data) or ""))
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

    open_image(data, what).close()
    try:
        with Image.open(io.BytesIO(data)) as img:
            img.verify()
        with Image.open(io.BytesIO(data)) as img:
            if img.format == "JPEG":
                img.draft("RGB", (64, 64))  # decode the whole stream at 1/8 scale: cheap
            with DECODE_BUDGET.hold(pixel_bytes(img)):
                img.load()
    except Image.DecompressionBombError as exc:
        raise MediaError(f"{what}: image too large to decode safely ({exc})") from None
    except Exception as exc:  # Pillow raises many types for broken files
        raise MediaError(f"{what}: not a readable image ({exc})") from None


def check(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES, decode: bool = True) -> None:
    """Validate a medium without sending it: readable, decodable, supported format.

    Images are verified with Pillow (truncated files fail) and held to the pixel cap
    (:func:`max_pixels`); ``decode=False`` parses only the image header (cheap: an
    unreadable header and the pixel cap are caught, a truncated body is not), reading the
    file's head, or the whole file when it is to be sent from here (``sources.sending``:
    its bytes and content id are kept for the request). Audio and
    video only have their header sniffed, except audio to be converted to wav
    (``audio_transcode``: flac, ogg, m4a), whose first frame must decode, and video to be
    sampled (``video_frames``), which must open with a video stream and a duration. Remote URLs are
    checked for a format hint only.
    """
    if is_remote(ref):
        check_format(ref.kind, ref.format)
        return
    if ref.kind is Modality.IMAGE:
        key = _checked_key(file_version(ref))
        if decode:
            _verify_image(read_raw(ref, max_bytes, at_load=sending())[0], describe(ref))
        elif key is not None and key not in _CHECKED and sending():
            # to be sent from here: read whole once, for the header, its content id, its send
            data = read_raw(ref, max_bytes, at_load=True)[0]
            _open_head(lambda size: data[:size], ref).close()
        elif key is None or key not in _CHECKED:  # Pillow needs only a file's head for the header
            _header_image(ref, max_bytes).close()
        _remember_checked(key)
        return
    check_format(ref.kind, ref.format)
    fmt = supported_format(ref, read_raw(ref, max_bytes, head=64)[0])
    if ref.kind is Modality.AUDIO and fmt in TRANSCODED_AUDIO:  # to be converted: it must decode
        probe_audio(read_raw(ref, max_bytes)[0], describe(ref), max_bytes=DEFAULT_MAX_BYTES)
    elif ref.kind is Modality.VIDEO and media_settings().video_frames:  # to be sampled
        probe_video(read_raw(ref, max_bytes)[0], describe(ref), max_pixels=max_pixels())


def _header_image(ref: MediaRef, max_bytes: int) -> Any:
    """A local or inline image opened from its head (header parsed, nothing decoded)."""
    return _open_head(lambda size: read_raw(ref, max_bytes, head=size)[0], ref)


def _open_head(head: Callable[[int], bytes], ref: MediaRef) -> Any:
    """The image opened from ``head(n)``, its first n bytes: 64 KiB, then 1 MiB for a header
    behind large metadata blocks (EXIF, ICC). A header further in is unreadable, whether the
    file was read whole (a local run's check) or only its head (--dry-run, a Ray driver)."""
    first = head(_HEAD_BYTES)
    try:
        return open_image(first, ref)
    except MediaError:
        if len(first) < _HEAD_BYTES:  # that was the whole file
            raise
        return open_image(head(_HEADER_BYTES), ref)


def image_size(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES) -> tuple[int, int]:
    """``(width, height)`` of a local or inline image from its header, no pixel decoded
    (the pixel cap in force applies); a MediaError when the header is unreadable."""
    img = _header_image(ref, max_bytes)
    try:
        return img.size  # type: ignore[no-any-return]
    finally:
        img.close()
