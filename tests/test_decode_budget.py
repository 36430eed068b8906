"""Decoding images just under the pixel cap stays within bounded memory (red team round 3,
item 4): a process-wide budget of decoded pixel bytes, reduced decoding, 16-bit modes."""

from __future__ import annotations

import io
import subprocess
import sys
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


def test_concurrent_decodes_hold_their_real_bytes_within_the_budget(
        monkeypatch: pytest.MonkeyPatch) -> None:
    rgba = _png("RGBA", (1200, 1000))
    grey16 = _png("I;16", (1500, 1000), 3000)
    one = 1200 * 1000 * 4  # RGBA: 4 bytes a pixel, decoded once (no full-size premultiplied copy)
    monkeypatch.setattr(DECODE_BUDGET, "limit", one + 1)  # room for one such image at a time
    before = len(DECODE_BUDGET.holds)
    with ThreadPoolExecutor(4) as pool:
        outs = list(pool.map(lambda d: fit_image(d, "x.png", max_side=100, max_bytes=None),
                             [rgba, rgba, grey16, rgba]))
    holds = DECODE_BUDGET.holds[before:]
    assert sorted(holds) == [1500 * 1000 * 2] + [one] * 3  # 16-bit grey: 2 bytes a pixel
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


_CHILD = r"""
import io, resource, threading
from PIL import Image, ImageDraw
from groundscope.media.resize import fit_image
def png(shade):
    img = Image.new("RGBA", (4000, 4000), (shade, 20, 200, 128))
    ImageDraw.Draw(img).rectangle((0, 0, 50, 50), fill=(0, 255, 0, 255))
    out = io.BytesIO(); img.save(out, "PNG", compress_level=1); return out.getvalue()
files = [png(10), png(200)]
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096 // 2**20
base = rss()
done, stop = [threading.Event() for _ in files], threading.Event()
def work(i):  # decode, then stay alive (its malloc arena with it) until the end
    fit_image(files[i], "x.png", max_side=256, max_bytes=None)
    done[i].set()
    stop.wait()
threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
threads[0].start(); done[0].wait()
threads[1].start(); done[1].wait()
stop.set()
for t in threads: t.join()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024 - base)
"""


@pytest.mark.slow
def test_decodes_one_after_another_in_two_threads_peak_at_one_image() -> None:
    # 16 Mpx RGBA = 61 MiB decoded. Before: a premultiplied full-size copy (x2) and the freed
    # pixels kept by each thread's malloc arena (x2 again)
    out = subprocess.run([sys.executable, "-c", _CHILD], capture_output=True, text=True,
                         check=True)
    grew = int(out.stdout.strip().splitlines()[-1])
    assert grew < 108, f"peak RSS grew by {grew} MiB for a 61 MiB image"  # before: 128
