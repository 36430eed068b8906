"""Dataset column values -> ``MediaRef`` (no file is read)."""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from groundscope.defaults import DEFAULT_MAX_BYTES
from groundscope.errors import MediaError
from groundscope.media.formats import check_format
from groundscope.media.images import max_pixels
from groundscope.media.sources import classify, read_raw
from groundscope.types import MediaRef, Modality

_SCHEME_RE = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def media_from_value(
    value: Any,
    kind: Modality | str,
    *,
    format: str | None = None,
    base_dir: Path | None = None,
    detail: str | None = None,
    fps: Any = None,
) -> MediaRef:
    """Normalise one dataset value into a MediaRef (no file is read).

    Accepts a path / URL / data URI / base64 string, ``bytes``, a ``pathlib.Path``, a
    Pillow image (an image only: encoded as PNG bytes), a
    parquet ``{"bytes", "path"}`` dict (also ``url`` / ``data`` / ``<kind>`` keys, as in
    OpenAI parts) and objects with ``.bytes`` / ``.path`` attributes (HF feature-like).
    A video dict may carry ``fps`` (as EvalScope reads it; ``start`` / ``end`` and other
    keys are not sent, so not read). Inline payloads are checked to decode; unusable
    values raise MediaError.
    """
    kind = Modality(kind)
    fmt = check_format(kind, format)
    if isinstance(value, MediaRef):
        return value
    if isinstance(value, Mapping):
        source, dict_fmt = _from_mapping(value, kind)
        fmt = fmt or check_format(kind, dict_fmt)
        if fps is None and kind is Modality.VIDEO:
            fps = value.get("fps")
    else:
        source = _from_object(value, kind)
    ref = MediaRef(kind=kind, source=source, format=fmt, detail=detail, base_dir=base_dir,
                   fps=check_fps(fps) if kind is Modality.VIDEO else None)
    if classify(source) in ("data", "base64"):
        read_raw(ref, DEFAULT_MAX_BYTES)  # decodes: invalid base64 or an oversize payload fails here
    return ref


def check_fps(value: Any) -> float | None:
    """A video's ``fps`` as a float (``2`` -> ``2.0``, as EvalScope sends it); None stays
    None; anything but a finite positive number (or its text) is a MediaError."""
    if value is None:
        return None
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    if number is None or not math.isfinite(number) or number <= 0:
        raise MediaError(f"fps: expected a positive number, got {value!r}")
    return number


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
    if kind is Modality.IMAGE and _is_pil_image(value):
        return _pil_bytes(value)
    attrs = {k: getattr(value, k) for k in ("bytes", "path") if getattr(value, k, None)}
    if attrs:
        return _from_mapping(attrs, kind)[0]
    raise MediaError(f"unusable {kind} value of type {type(value).__name__}")


def _is_pil_image(value: Any) -> bool:
    return type(value).__module__.startswith("PIL.") and callable(getattr(value, "save", None))


def _pil_bytes(image: Any) -> bytes:
    """A Pillow image as PNG bytes (lossless), held to the pixel cap first."""
    width, height = getattr(image, "size", (0, 0))
    if width * height > max_pixels():
        raise MediaError(f"a Pillow image of {width}x{height} pixels is over the pixel cap "
                         f"({max_pixels():,})")
    buf = io.BytesIO()
    try:
        image.save(buf, format="PNG")
    except (OSError, ValueError) as exc:
        raise MediaError(f"a Pillow image could not be encoded as PNG: {exc}") from exc
    return buf.getvalue()


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
