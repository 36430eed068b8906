"""An image decoded at a reduced size, under the decode budget (``media/budget.py``).

:func:`decoded` decodes a lazily opened Pillow image only as large as a target needs:
a JPEG at 1/2, 1/4 or 1/8 scale (``Image.draft``); other formats in full, then reduced by
an integer factor (``Image.reduce``, a box filter) band by band, so that no full-size copy
is made beside the decoded pixels (Pillow's ``resize`` of RGBA makes a premultiplied one;
16-bit grey is reduced as 32-bit). The result is at least ``gap`` times the target, for the
caller's final filter, and the budget is held while the full-size pixels may exist.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from groundscope.media.budget import DECODE_BUDGET, pixel_bytes
from groundscope.media.images import open_image

# the mode an image is reduced and resized in: premultiplied alpha, 32-bit for 16-bit grey
WORK_MODES = {"RGBA": "RGBa", "LA": "La", "I;16": "I", "I;16L": "I", "I;16B": "I", "I;16N": "I"}
_UNREDUCIBLE = frozenset({"1", "P"})  # resized with the nearest pixel: nothing to reduce
_BAND_PIXELS = 1 << 20  # pixels of the full image converted and reduced at a time


def _factor(size: tuple[int, int], want: tuple[int, int], gap: float) -> tuple[int, int]:
    return (max(1, int(size[0] / max(1, want[0]) / gap)),
            max(1, int(size[1] / max(1, want[1]) / gap)))


@contextmanager
def decoded(img: Any, want: tuple[int, int] | None, *, gap: float = 3.0) -> Iterator[Any]:
    """``img`` (header parsed, nothing decoded) decoded, in its work mode (``WORK_MODES``;
    the caller converts back to ``img.mode``), reduced to no less than ``gap`` x ``want``
    when that is at least half the size (``want`` None: full size). Valid in the body only."""
    if want is not None:
        img.draft(None, (int(want[0] * gap), int(want[1] * gap)))  # JPEG only; else no-op
    work = WORK_MODES.get(img.mode, img.mode)
    factor = _factor(img.size, want, gap) if want is not None else (1, 1)
    reduce = factor != (1, 1) and img.mode not in _UNREDUCIBLE
    converted = (work,) if work != img.mode and not reduce else ()
    with DECODE_BUDGET.hold(pixel_bytes(img, *converted)):
        img.load()
        if reduce:
            yield _band_reduce(img, work, factor)
        elif converted:
            yield img.convert(work)
        else:
            yield img


def _band_reduce(img: Any, work: str, factor: tuple[int, int]) -> Any:
    """``img`` box-reduced by ``factor`` in mode ``work``, converting a band of rows at a
    time (the same pixels as ``img.convert(work).reduce(factor)``, no full-size copy)."""
    from PIL import Image

    width, height = img.size
    fx, fy = factor
    out = Image.new(work, (-(-width // fx), -(-height // fy)))
    step = fy * max(1, _BAND_PIXELS // max(1, width * fy))
    for top in range(0, height, step):
        band = img.crop((0, top, width, min(height, top + step)))
        if band.mode != work:
            band = band.convert(work)
        out.paste(band.reduce((fx, fy)), (0, top // fy))
    return out


def small_image(data: bytes, what: str, side: int) -> Any:
    """A copy of the image ``data`` at most ``side`` px a side, in its own mode (a preview):
    the pixel cap applies, and it is decoded reduced, under the budget (see the module doc)."""
    from PIL import Image

    img = open_image(data, what)
    try:
        width, height = img.size
        scale = min(1.0, side / max(width, height, 1))
        want = (max(1, round(width * scale)), max(1, round(height * scale)))
        mode = img.mode
        with decoded(img, want, gap=2.0) as pixels:
            small = (pixels.resize(want, Image.Resampling.LANCZOS) if pixels.size != want
                     else pixels.copy())
        return small.convert(mode) if small.mode != mode else small
    finally:
        img.close()
