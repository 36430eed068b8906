"""Peak RSS of an evaluation downscaling images just under the pixel cap (issue 23, item 4).

Run by hand (not part of the test suite)::

    python benchmarks/bench_decode_memory.py            # both cases
    python benchmarks/bench_decode_memory.py --case six  # six 89.3 Mpx PNGs, concurrency 8

Cases, each a ``groundscope eval`` in its own process against the simulator, with
``--max-image-side 512``; the figure is the peak RSS of that process alone (``os.wait4``):

- ``six``: six PNGs of 9450x9450 = 89.3 Mpx, 16-bit grey + alpha (~347 KB each: a bomb that
  compresses well), concurrency 8;
- ``one16``: one 16-bit RGBA PNG of 89.3 Mpx, alone.

The PNGs are written row by row (zlib streaming), never held as pixels by this script.
"""

from __future__ import annotations

import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path

from _common import CACHE, simulator_process

SIDE = 9450  # 9450^2 = 89,302,500 pixels: just under the default cap of 89,478,485


def write_png(path: Path, side: int, *, color: int, depth: int, seed: int) -> None:
    """A ``side`` x ``side`` PNG of PNG colour type ``color`` and ``depth`` bits, one flat
    shade from ``seed`` with one row of a ramp (each seed its own bytes)."""
    channels = {0: 1, 2: 3, 4: 2, 6: 4}[color]
    row_bytes = side * channels * depth // 8
    shade = bytes([(seed * 37 + 11) % 256])
    row = b"\x00" + shade * row_bytes
    ramp = b"\x00" + shade * (row_bytes - 256) + bytes(range(256))
    z = zlib.compressobj(9)
    body = b"".join(z.compress(ramp if y == seed else row) for y in range(side)) + z.flush()

    def chunk(kind: bytes, data: bytes) -> bytes:
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    path.write_bytes(b"\x89PNG\r\n\x1a\n"
                     + chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, depth, color, 0, 0, 0))
                     + chunk(b"IDAT", body) + chunk(b"IEND", b""))


def dataset(name: str, count: int, *, color: int, depth: int) -> Path:
    root = CACHE / f"decode_{name}_{SIDE}"
    data = root / "bench.jsonl"
    if data.exists():
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    with data.open("w") as fh:
        for i in range(count):
            write_png(root / "img" / f"{i}.png", SIDE, color=color, depth=depth, seed=i)
            fh.write(json.dumps({"id": f"r{i}", "messages": [{"role": "user", "content": [
                {"type": "text", "text": "What is in this picture?"},
                {"type": "image_url", "image_url": {"url": f"img/{i}.png"}}]}],
                "answer": "grey"}) + "\n")
    return root


def peak_rss_mb(root: Path, concurrency: int) -> tuple[float, float, int]:
    """(peak RSS MB of the eval process, wall s, exit code) of one ``groundscope eval``."""
    args = json.dumps({"general_vqa": {"local_path": str(root), "subset_list": ["bench"]}})
    with simulator_process(root) as url, tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            [sys.executable, "-m", "groundscope", "eval", "--model", "sim", "--api-url", url,
             "--datasets", "general_vqa", "--dataset-args", args, "--max-image-side", "512",
             "--eval-batch-size", str(concurrency), "--work-dir", tmp, "--no-progress"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "TERM": "dumb"})
        _, status, usage = os.wait4(proc.pid, 0)
        return usage.ru_maxrss / 1024, time.perf_counter() - t0, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", choices=("six", "one16", "all"), default="all")
    case = parser.parse_args().case
    cases = {"six": ("six 89.3 Mpx 16-bit grey+alpha PNGs, concurrency 8",
                     lambda: dataset("la16x6", 6, color=4, depth=16), 8),
             "one16": ("one 89.3 Mpx 16-bit RGBA PNG",
                       lambda: dataset("rgba16x1", 1, color=6, depth=16), 8)}
    for name, (label, make, conc) in cases.items():
        if case in (name, "all"):
            root = make()
            rss, wall, code = peak_rss_mb(root, conc)
            size = sum(p.stat().st_size for p in (root / "img").iterdir()) // 1024
            print(f"{label} ({size} KB of files), --max-image-side 512: peak RSS {rss:.0f} MB, "
                  f"{wall:.1f} s, exit {code}")


if __name__ == "__main__":
    main()
