"""Throughput of ``--executor ray`` with 1 vs 2 workers (and a local run for reference).

Run by hand (needs ``pip install 'groundscope[ray]'``; not part of the test suite)::

    python benchmarks/bench_ray.py                  # N=160 records, one 1000x1000 noise PNG each
    python benchmarks/bench_ray.py --n 400 --px 1400

Two simulator processes: one serves the model, the other an LLM judge that sees the image
too (``judge.multimodal``), so each sample's media are read, hashed, base64-encoded and
sent twice, by whichever process runs the sample: the CPU-bound part a worker takes off the
driver. (Video frame decoding, the heavier case, is not on this branch's main yet.) One
local Ray (``num_cpus=2``) is started once and used by both Ray runs. Each Ray run starts its
own actors (one process per worker and per endpoint gate): the "streaming" column leaves
that start-up out (the driver's dispatch phase alone), "end to end" keeps it.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import CACHE, simulator_process

PHASE: dict[str, float] = {}


def _time_dispatch() -> None:
    """Time the driver's dispatch phase (its actors already up): a hand-run probe."""
    from groundscope.scaleout import driver

    dispatch = driver.RayDriver._dispatch

    async def timed(self: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        await dispatch(self, *args)
        PHASE["dispatch"] = time.perf_counter() - t0

    driver.RayDriver._dispatch = timed  # type: ignore[method-assign]


def noise_png_dataset(n: int, px: int) -> Path:
    """``n`` General-VQA records, each with its own ``px`` x ``px`` RGB noise PNG (about
    3 bytes a pixel: noise does not compress), cached under GROUNDSCOPE_BENCH_DIR."""
    import json

    import numpy as np
    from PIL import Image

    root = CACHE / f"ray_noise_{n}_{px}"
    data = root / "bench.jsonl"
    if data.exists():
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    with data.open("w") as fh:
        for i in range(n):
            pixels = rng.integers(0, 256, (px, px, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(root / "img" / f"{i}.png", compress_level=1)
            rec = {"id": f"r{i}", "answer": "noise", "messages": [{"role": "user", "content": [
                {"type": "text", "text": f"Question {i}: what is in this picture?"},
                {"type": "image_url", "image_url": {"url": f"img/{i}.png"}}]}]}
            fh.write(json.dumps(rec) + "\n")
    return root


def _task(model_url: str, judge_url: str, data: Path, work: Path, **extra: Any) -> dict[str, Any]:
    return {"model": "bench", "api_url": model_url, "datasets": ["general_vqa"],
            "dataset_args": {"general_vqa": {"local_path": str(data / "bench.jsonl")}},
            "judge": {"strategy": "llm", "multimodal": True,
                      "models": [{"model_id": "judge", "api_url": judge_url}]},
            "eval_batch_size": 16, "judge_concurrency": 16, "work_dir": str(work),
            "no_timestamp": True, **extra}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=160)
    parser.add_argument("--px", type=int, default=1000, help="image side in pixels")
    args = parser.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token written into ~/.ray
    import ray

    from groundscope import run_task

    data = noise_png_dataset(args.n, args.px)
    size = sum(p.stat().st_size for p in (data / "img").iterdir()) / args.n / 1e6
    temp = tempfile.mkdtemp(prefix="gs-bench-ray-")
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    print(f"ray.init: {time.perf_counter() - started:.1f} s (not in the figures below)")
    print(f"N={args.n} records, one {args.px}x{args.px} noise PNG each ({size:.1f} MB); model and "
          f"multimodal judge "
          f"on two simulator processes; eval_batch_size 16, judge_concurrency 16; "
          f"{os.cpu_count()} CPUs (shared)")
    _time_dispatch()
    rates: dict[str, float] = {}
    runs = (("local (1 process)", {}), ("ray, 1 worker", {"executor": "ray", "workers": 1}),
            ("ray, 2 workers", {"executor": "ray", "workers": 2}))
    with simulator_process(data) as model_url, simulator_process(data) as judge_url, \
            tempfile.TemporaryDirectory() as tmp:
        print(f"  {'':<18} {'end to end':>22} {'streaming':>22}")
        for label, extra in runs:
            work = Path(tmp) / label.replace(" ", "_").replace(",", "")
            PHASE.clear()
            t0 = time.perf_counter()
            report = run_task(_task(model_url, judge_url, data, work, **extra))
            wall = time.perf_counter() - t0
            summary = report.dataset("general_vqa").summary
            assert summary.succeeded == args.n, summary
            rates[label] = args.n / wall
            stream = PHASE.get("dispatch")
            if stream:
                rates[f"{label} streaming"] = args.n / stream
            shown = f"{stream:6.1f} s {args.n / stream:7.1f}/s" if stream else f"{'-':>22}"
            print(f"  {label:<18} {wall:6.1f} s {rates[label]:7.1f}/s  {shown}")
    ray.shutdown()
    for kind in ("", " streaming"):
        ratio = rates[f"ray, 2 workers{kind}"] / rates[f"ray, 1 worker{kind}"]
        print(f"  2 workers / 1 worker{kind or ' end to end'}: {ratio:.2f}x")


if __name__ == "__main__":
    main()
