"""Decoding images just under the pixel cap stays within bounded memory (red team round 3,
item 4): a process-wide budget of decoded pixel bytes, reduced decoding, 16-bit modes."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import pytest
from PIL import Image, ImageDraw

from groundscope import media
from groundscope.media.budget import DECODE_BUDGET
from groundscope.media.resize import fit_image


def _png(mode: str, size: tuple[int, int], shade: int = 90) -> bytes:
    img = Image.new(mode, size, shade if mode in ("L", "I;16") else (shade, 20, 200, 128)[
        :len(mode)])
    ImageDraw.Draw(img).rectangle((10, 10, 40, 30), fill=shade // 2 if mode in ("L", "I;16")
                                  else (0, 255, 0, 255)[:len(mode)])
    out = io.BytesIO()
    img.save(out, "PNG")
    return out.getvalue()


@pytest.fixture(autouse=True)
def _fresh_accounts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The process's budget, its records of earlier decodes (other tests') set aside."""
    monkeypatch.setattr(DECODE_BUDGET, "peak", 0)
    monkeypatch.setattr(DECODE_BUDGET, "holds", [])


def test_concurrent_decodes_hold_their_real_bytes_within_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rgba = _png("RGBA", (1200, 1000))
    grey16 = _png("I;16", (1500, 1000), 3000)
    one = 1200 * 1000 * 4  # RGBA: 4 bytes a pixel, decoded once (no full-size premultiplied copy)
    monkeypatch.setattr(DECODE_BUDGET, "limit", one + 1)  # room for one such image at a time
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda d: fit_image(d, "x.png", max_side=100, max_bytes=None),
                             [rgba, rgba, grey16, rgba]))
    assert sorted(DECODE_BUDGET.holds) == [1500 * 1000 * 2] + [one] * 3  # 16-bit grey: 2 bytes a pixel
    assert DECODE_BUDGET.peak <= one + 1 and DECODE_BUDGET.used == 0
    modes = [Image.open(io.BytesIO(o)) for o in outs if o is not None]
    assert [(m.size, m.mode) for m in modes] == [((100, 83), "RGBA")] * 2 + [
        ((100, 67), "I;16"), ((100, 83), "RGBA")]


def test_a_16_bit_grey_png_is_downscaled_keeping_16_bits() -> None:
    # reduced 4x first (Pillow cannot reduce or resize I;16 with a reducing gap: "wrong mode")
    out = fit_image(_png("I;16", (1200, 600), 40000), "deep.png", max_side=100, max_bytes=None)
    assert out is not None
    with Image.open(io.BytesIO(out)) as img:
        assert (img.size, img.mode) == ((100, 50), "I;16")
        assert img.getpixel((95, 45)) == 40000


def test_an_image_over_the_whole_budget_still_decodes_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DECODE_BUDGET, "limit", 1000)
    out = fit_image(_png("RGB", (600, 300)), "big.png", max_side=60, max_bytes=None)
    assert out is not None and Image.open(io.BytesIO(out)).size == (60, 30)
    assert DECODE_BUDGET.holds[-1] == 600 * 300 * 4


def test_a_report_thumbnail_is_decoded_under_the_budget() -> None:
    small = media.small_image(_png("RGBA", (900, 600)), "t.png", 128)
    assert (small.size, small.mode) == ((128, 85), "RGBA")
    assert DECODE_BUDGET.holds[-1] == 900 * 600 * 4
