"""Shared helpers of the hand-run benchmarks: synthetic datasets and a simulator process."""

from __future__ import annotations

import io
import json
import math
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("GROUNDSCOPE_BENCH_DIR", "/tmp/groundscope-bench"))


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free confidence interval for the median of ``values`` (per-pair ratios):
    the order statistics ``k`` and ``n + 1 - k`` of the sorted values, for the largest ``k``
    whose interval covers the median with probability >= ``level`` (each value falls below
    the median with probability 1/2, so the count below is Binomial(n, 1/2)). None below six
    values, where even min..max covers less than 95 %. Nothing is assumed of the spread: on
    a machine whose runs vary by +-15 %, it says whether a median ratio of 1.03 is one.

    >>> median_interval([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    (1.0, 6.0)
    >>> median_interval([float(v) for v in range(1, 21)])
    (6.0, 15.0)
    >>> median_interval([1.0, 2.0, 3.0]) is None
    True
    """
    ordered = sorted(values)
    n = len(ordered)
    below = 0.0  # P(count below the median <= k - 1), k = 1, 2, ...
    best = None
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2 ** n
        if 1 - 2 * below < level:
            break
        best = k
    return None if best is None else (ordered[best - 1], ordered[n - best])


def make_vqa_dataset(n: int, *, image_kb: int = 100, distinct: int | None = None) -> Path:
    """A General-VQA JSONL of ``n`` records, each with one ~``image_kb`` KB JPEG.

    ``distinct`` images are written (default: one per record) and shared round-robin.
    The dataset is cached under GROUNDSCOPE_BENCH_DIR between runs.
    """

    distinct = distinct or n
    root = CACHE / f"vqa_{n}_{image_kb}kb_{distinct}_photo"
    data = root / "bench.jsonl"
    if data.exists():
        return root
    (root / "img").mkdir(parents=True, exist_ok=True)
    rng = random.Random(0)
    base = _photo_like(rng)
    quality = 95
    while quality > 20:  # the JPEG quality that gives about the wanted size
        buf = io.BytesIO()
        base.save(buf, "JPEG", quality=quality)
        if buf.tell() <= image_kb * 1024:
            break
        quality -= 5
    for i in range(distinct):
        img = base.copy()
        for _ in range(8):  # a few changed pixels make every file's bytes distinct
            img.putpixel((rng.randrange(img.width), rng.randrange(img.height)),
                         (rng.randrange(256),) * 3)
        img.save(root / "img" / f"{i}.jpg", "JPEG", quality=quality)
    words = ["cat", "dog", "tree", "car", "house", "river", "person", "bird", "road", "sky"]
    with data.open("w") as fh:
        for i in range(n):
            answer = " ".join(rng.choice(words) for _ in range(rng.randint(1, 8)))
            rec = {"id": f"r{i}", "messages": [{"role": "user", "content": [
                {"type": "text", "text": f"Question {i}: what is in this picture?"},
                {"type": "image_url", "image_url": {"url": f"img/{i % distinct}.jpg"}}]}],
                "answer": answer}
            fh.write(json.dumps(rec) + "\n")
    return root


def write_clip(out: Path, seed: int) -> None:
    """A short clip written with PyAV: 3 s, 10 fps, 320x240, MPEG-4, a keyframe every 10
    frames, colours from ``seed`` (each seed its own bytes) and a moving white band."""
    import av
    import numpy as np

    with av.open(str(out), "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=10)
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = 320, 240, "yuv420p", 10
        for k in range(30):
            rgb = np.zeros((240, 320, 3), np.uint8)
            rgb[:, :] = ((seed * 37 + k * 8) % 256, (seed * 11) % 256, (k * 8 + seed // 256) % 256)
            rgb[k * 8:(k * 8) + 16, :, :] = 255  # a moving band
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def _photo_like(rng: random.Random) -> Any:
    """An 800x600 picture with gradients, shapes and grain: JPEG-compresses like a photo."""
    from PIL import Image, ImageDraw, ImageFilter

    img = Image.linear_gradient("L").resize((800, 600)).convert("RGB")
    draw = ImageDraw.Draw(img)
    for _ in range(40):
        x, y = rng.randrange(800), rng.randrange(600)
        r = rng.randrange(10, 120)
        draw.ellipse((x - r, y - r, x + r, y + r),
                     fill=(rng.randrange(256), rng.randrange(256), rng.randrange(256)))
    img = img.filter(ImageFilter.GaussianBlur(3))
    grain = Image.effect_noise((800, 600), 24).convert("RGB")
    return Image.blend(img, grain, 0.15)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def simulator_process(dataset_dir: Path, *, latency_ms: float = 0.0,
                      subset: str = "bench") -> Iterator[str]:
    """Run ``groundscope simulate`` in its own process (its CPU is not billed to the client)."""
    port = free_port()
    args = json.dumps({"general_vqa": {"local_path": str(dataset_dir), "subset_list": [subset]}})
    proc = subprocess.Popen(
        [sys.executable, "-m", "groundscope", "simulate", "--port", str(port), "--datasets",
         "general_vqa", "--dataset-args", args, "--accuracy", "0.8",
         "--latency-ms", str(latency_ms)],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True)
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if proc.poll() is not None:
                raise RuntimeError(f"simulator exited: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


CHILD = r"""
import json, resource, sys, time
from groundscope import run_task
from groundscope import runner as R
marks = {}
_evaluate = R.Runner._evaluate
async def timed(self, client):  # the pipeline phase alone: load, request, score, store
    marks["start"], marks["cpu_start"] = time.perf_counter(), time.process_time()
    await _evaluate(self, client)
    marks["end"], marks["cpu_end"] = time.perf_counter(), time.process_time()
R.Runner._evaluate = timed
from groundscope.client import chat as O
done = []  # when each model request completed
_complete = O.ChatClient.complete
async def complete(self, *args, **kwargs):
    try:
        return await _complete(self, *args, **kwargs)
    finally:
        done.append(time.perf_counter())
O.ChatClient.complete = complete
cfg = json.loads(sys.argv[1])
t0, c0 = time.perf_counter(), time.process_time()
report = run_task(cfg)
wall, cpu = time.perf_counter() - t0, time.process_time() - c0
s = report.datasets[0].summary
conc = cfg.get("eval_batch_size", 8)
first, last = conc - 1, len(done) - conc - 1  # the first wave done .. the last wave started
steady = (last - first) / (done[last] - done[first]) if last > first else None
print(json.dumps({"wall": wall, "cpu": cpu, "pipeline": marks["end"] - marks["start"],
                  "pipeline_cpu": marks["cpu_end"] - marks["cpu_start"],
                  "steady_rate": steady,
                  "succeeded": s.succeeded, "errored": s.errored,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def run_eval_child(api_url: str, dataset_dir: Path, concurrency: int, work_dir: Path,
                   subset: str = "bench", *, src: Path | None = None,
                   env: Mapping[str, str] | None = None) -> dict:
    """One ``run_task`` in a fresh process: wall s (everything, imports and report included),
    pipeline s (the streaming phase alone), pipeline_cpu s (the process's CPU in that phase,
    every thread: the tokenizer's build and Pillow's import fall inside it, the imports before
    it and the reports and page after it do not), steady_rate (requests/s completed between the
    first wave's end and the last wave's start), CPU s, peak RSS MB, counts. ``src``: the
    groundscope sources to import (another commit's, for an A/B run); default: the installed.
    ``env``: variables set for the child alone (an allocator setting, for one side of an A/B)."""
    cfg = {"model": "sim", "api_url": api_url, "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(dataset_dir), "subset_list": [subset]}},
           "eval_batch_size": concurrency, "work_dir": str(work_dir), "ignore_errors": True}
    return run_child(cfg, src=src, env=env)


def source_env(src: Path | None, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of a child process that imports groundscope from ``src`` (first on
    its path, before the installed copy), or the installed one; ``extra`` set on top."""
    env = {**os.environ, "TERM": "dumb", **(extra or {})}
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    return env


def run_child(cfg: dict[str, Any], *, src: Path | None = None,
              env: Mapping[str, str] | None = None) -> dict:
    """``run_task(cfg)`` in a fresh process, measured as :func:`run_eval_child` says."""
    out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True,
                         text=True, check=True, env=source_env(src, env))
    return json.loads(out.stdout.strip().splitlines()[-1])
