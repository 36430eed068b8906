"""Downscale an image to a provider's limits, keeping its format and alpha (Pillow).

``fit_image`` returns ``None`` for an image already within ``max_side`` and ``max_bytes``
(sent untouched), else new bytes of the same format: scaled so its longest side is at most
``max_side``, then, while over ``max_bytes``, saved at stepped-down quality (JPEG / WebP) and
scaled by 3/4, never below :data:`MIN_SIDE` px. An EXIF Orientation is applied to the pixels
(the copy has no EXIF block to carry it). An image that cannot fit so is a
``MediaError`` saying how far it got. Modes are kept (RGBA stays RGBA, a palette with
transparency keeps it, 16-bit grey stays 16-bit); an animated GIF / WebP keeps its
first frame only. The image is decoded no larger than needed (a JPEG at a reduced scale,
others reduced band by band), holding the decode budget meanwhile (``media/reduced.py``).
"""

from __future__ import annotations

import io
from typing import Any

from groundscope.errors import MediaError
from groundscope.media.images import open_image
from groundscope.media.reduced import decoded

MIN_SIDE = 64  # smaller than this is no use to a vision model: refuse instead
QUALITIES = (90, 80, 70, 55, 40)  # JPEG / WebP quality steps for max_bytes
_LOSSY = frozenset({"JPEG", "WEBP"})
_SAVE_AS = {"MPO": "JPEG"}  # Pillow opens some JPEGs as MPO


def fit_image(data: bytes, what: str, *, max_side: int | None,
              max_bytes: int | None) -> bytes | None:
    """The image within ``max_side`` px and ``max_bytes`` bytes, or None if it already is.

    Decoded only as large as the result needs, under the decode budget (``media/reduced.py``).

    >>> from PIL import Image
    >>> buf = io.BytesIO(); Image.new("RGBA", (400, 100), (1, 2, 3, 4)).save(buf, "PNG")
    >>> out = fit_image(buf.getvalue(), "x.png", max_side=200, max_bytes=None)
    >>> Image.open(io.BytesIO(out)).size, Image.open(io.BytesIO(out)).mode
    ((200, 50), 'RGBA')
    >>> fit_image(out, "x.png", max_side=200, max_bytes=None) is None
    True
    """
    img = open_image(data, what)  # the pixel cap, before any pixel is decoded
    try:
        width, height = img.size
        too_wide = bool(max_side) and max(width, height) > (max_side or 0)
        too_big = bool(max_bytes) and len(data) > (max_bytes or 0)
        if not (too_wide or too_big):
            return None
        fmt = _SAVE_AS.get(str(img.format), str(img.format))
        scale = min(1.0, (max_side or max(width, height)) / max(width, height))
        want = (max(1, round(width * scale)), max(1, round(height * scale))) if too_wide else None
        try:
            with decoded(img, want) as pixels:  # a PNG's EXIF may follow its pixels:
                turn = _TURNS.get(img.getexif().get(0x0112, 1) or 1)  # read once decoded
                return _shrink(pixels, (width, height), turn, img.mode, img.info, fmt, what,
                               scale, max_bytes)
        except MediaError:
            raise
        except Exception as exc:  # Pillow's many error types for a broken body
            raise MediaError(f"{what}: not a readable image ({exc})") from None
    finally:
        img.close()


# EXIF Orientation -> the turn that shows the pixels as a viewer does (a new copy drops the
# EXIF block, and with it the tag: a phone's sideways JPEG), applied to the reduced pixels
_TURNS = {2: "FLIP_LEFT_RIGHT", 3: "ROTATE_180", 4: "FLIP_TOP_BOTTOM", 5: "TRANSPOSE",
          6: "ROTATE_270", 7: "TRANSVERSE", 8: "ROTATE_90"}


def _shrink(pixels: Any, full: tuple[int, int], turn: str | None, mode: str,
            info: dict[str, Any], fmt: str, what: str, scale: float,
            max_bytes: int | None) -> bytes:
    """Sizes from the full image's ``full`` size at ``scale`` (x 3/4 while over
    ``max_bytes``), each resized from ``pixels`` (decoded, perhaps reduced, in its work mode),
    turned upright and back in ``mode``."""
    from PIL import Image

    width, height = full
    while True:
        size = (max(1, round(width * scale)), max(1, round(height * scale)))
        frame = pixels if size == pixels.size else pixels.resize(
            size, Image.Resampling.LANCZOS, reducing_gap=3.0)
        if turn is not None:
            frame = frame.transpose(getattr(Image.Transpose, turn))
        if frame.mode != mode:
            frame = frame.convert(mode)
        out = b""
        for quality in (QUALITIES if fmt in _LOSSY and max_bytes else (QUALITIES[0],)):
            out = _save(frame, fmt, quality, info)
            if not max_bytes or len(out) <= max_bytes:
                return out
        if max(size) * 3 // 4 < MIN_SIDE:
            raise MediaError(f"{what}: image cannot fit in max_image_bytes={max_bytes}: still "
                             f"{len(out)} bytes at {size[0]}x{size[1]} px (smallest tried)")
        scale *= 0.75


def _save(img: Any, fmt: str, quality: int, info: dict[str, Any]) -> bytes:
    out = io.BytesIO()
    options: dict[str, Any] = {}
    if fmt in _LOSSY:
        options["quality"] = quality
    if fmt == "PNG":
        options["optimize"] = False
    if "transparency" in info and img.mode in ("P", "L", "RGB"):
        options["transparency"] = info["transparency"]
    if fmt == "JPEG" and img.mode not in ("RGB", "L", "CMYK"):
        img = img.convert("RGB")
    img.save(out, format=fmt, **options)
    return out.getvalue()
