"""Throughput of ``--executor ray`` with 1 vs 2 workers (and a local run for reference).

Run by hand (needs ``pip install 'groundscope[ray,video]'``; not part of the test suite)::

    python benchmarks/bench_ray.py                  # N=800 records, one short clip each
    python benchmarks/bench_ray.py --n 2000
    python benchmarks/bench_ray.py --media png      # N=160, one 1000x1000 noise PNG each
    python benchmarks/bench_ray.py --media png --n 400 --px 1400
    python benchmarks/bench_ray.py --rounds 5       # local, 1 worker, 2 workers, 5 times over

Two simulator processes: one serves the model, the other an LLM judge that sees the media
too (``judge.multimodal``). ``--media video`` (the default): each record has its own short
clip (3 s, 10 fps, 320x240 MPEG-4, written with PyAV like bench_video_frames.py) and the run
uses ``video_frames: 8``, so whichever process runs a sample decodes its clip into 8 frames
(once: the model and judge requests share the decoded frames), encodes them as JPEGs and
sends them twice. ``--media png``: one ``px`` x ``px`` noise PNG per record, read, hashed,
base64-encoded and sent twice. Either is the CPU-bound part a worker takes off the driver.
One local Ray (``num_cpus=2``) is started once and used by both Ray runs. Each Ray run
starts its own actors (one process per worker and per endpoint gate): the "streaming"
column leaves that start-up out (the Ray driver's dispatch phase alone; for the local run,
its item loop), "end to end" keeps it and the reports. "CPU" is this process's CPU time
(the driver's, for a Ray run: what it kept of the work), in total and per sample.
``--rounds K`` runs the three K times in turn and prints each round's ratios and their
median: the ratios of one round are of runs seconds apart, so a machine's load that comes
and goes moves them less than the rates.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from _common import CACHE, simulator_process, write_clip

PHASE: dict[str, float] = {}


def _time_streaming() -> None:
    """Time the streaming phase (a hand-run probe): the Ray driver's dispatch (its actors
    already up) and, for the local run, the runner's item loop (its client already up)."""
    from groundscope import runner
    from groundscope.scaleout import driver

    dispatch, evaluate = driver.RayDriver._dispatch, runner.Runner._evaluate

    async def timed_dispatch(self: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        await dispatch(self, *args)
        PHASE["streaming"] = time.perf_counter() - t0

    async def timed_evaluate(self: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        await evaluate(self, *args)
        PHASE["streaming"] = time.perf_counter() - t0

    driver.RayDriver._dispatch = timed_dispatch  # type: ignore[method-assign]
    runner.Runner._evaluate = timed_evaluate  # type: ignore[method-assign]


class ChildCPU:
    """CPU seconds of this process's descendants (the simulators; Ray's GCS, raylet, agents,
    workers and actors), polled while a run goes so processes ended by the run still count:
    where the CPU of a sample goes besides the driver (the profile behind the Ray ratio)."""

    def __init__(self) -> None:
        import threading

        import psutil  # Ray's own copy, on the path once ray is imported

        self._psutil = psutil
        self._seen: dict[int, tuple[str, float]] = {}
        self._base = self._poll()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _poll(self) -> dict[int, tuple[str, float]]:
        out = {}
        for proc in self._psutil.Process().children(recursive=True):
            try:
                times = proc.cpu_times()
                out[proc.pid] = (proc.name(), times.user + times.system)
            except self._psutil.Error:
                continue
        return out

    def _loop(self) -> None:
        while not self._stop.wait(0.2):
            self._seen.update(self._poll())

    def stop(self) -> dict[str, float]:
        """CPU seconds by kind of process since this object was made."""
        self._stop.set()
        self._thread.join()
        self._seen.update(self._poll())
        out: dict[str, float] = {}
        for pid, (name, cpu) in self._seen.items():
            kind = "simulators" if name.startswith("python") or name.startswith("groundscope") \
                else "ray workers" if "SampleWorker" in name else "ray other"
            out[kind] = out.get(kind, 0.0) + cpu - self._base.get(pid, (name, 0.0))[1]
        return out


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


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


def clip_dataset(n: int) -> Path:
    """``n`` General-VQA records, each with its own short clip (``<video 1>``), cached
    under GROUNDSCOPE_BENCH_DIR."""
    import json

    root = CACHE / f"ray_clips_{n}"
    data = root / "bench.jsonl"
    if data.exists():
        return root
    (root / "clips").mkdir(parents=True, exist_ok=True)
    with data.open("w") as fh:
        for i in range(n):
            write_clip(root / "clips" / f"{i}.mp4", i)
            rec = {"id": f"r{i}", "answer": "a band", "video_1": f"clips/{i}.mp4",
                   "messages": [{"role": "user", "content": f"Clip {i}: what happens in <video 1>?"}]}
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
    parser.add_argument("--n", type=int, default=None,
                        help="records (default: 800 with --media video, 160 with png)")
    parser.add_argument("--media", choices=("video", "png"), default="video",
                        help="one short clip per record (video_frames 8) or one noise PNG")
    parser.add_argument("--px", type=int, default=1000, help="PNG side in pixels (--media png)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run local, 1 worker, 2 workers this many times in turn")
    args = parser.parse_args()
    args.n = args.n or (800 if args.media == "video" else 160)
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token written into ~/.ray
    import ray

    from groundscope import run_task
    from groundscope.client.mediaprep import PREPARED
    from groundscope.media.wire import CACHE

    if args.media == "video":
        data, media, task_extra = clip_dataset(args.n), "clips", {"video_frames": 8}
        what = "one 3 s 320x240 MPEG-4 clip each, video_frames 8"
    else:
        data, media, task_extra = noise_png_dataset(args.n, args.px), "img", {}
        what = f"one {args.px}x{args.px} noise PNG each"
    size = sum(p.stat().st_size for p in (data / media).iterdir()) / args.n / 1e6
    temp = tempfile.mkdtemp(prefix="gs-bench-ray-")
    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
    print(f"ray.init: {time.perf_counter() - started:.1f} s (not in the figures below)")
    print(f"N={args.n} records, {what} ({size:.2f} MB); model and multimodal judge "
          f"on two simulator processes; eval_batch_size 16, judge_concurrency 16; "
          f"{os.cpu_count()} CPUs (shared), load average {_load()}")
    _time_streaming()
    profile: dict[str, dict[str, float]] = {}
    sent: dict[str, dict[str, int]] = {}  # prompt tokens per step: the same requests each run
    ratios: list[dict[str, float]] = []
    runs = (("local (1 process)", {}), ("ray, 1 worker", {"executor": "ray", "workers": 1}),
            ("ray, 2 workers", {"executor": "ray", "workers": 2}))
    with simulator_process(data) as model_url, simulator_process(data) as judge_url, \
            tempfile.TemporaryDirectory() as tmp:
        print(f"  {'':<18} {'end to end':>22} {'streaming':>22}  {'CPU':>7} {'CPU/sample':>10}  "
              "prompt tokens sent")
        for round_ in range(args.rounds):
            rates: dict[str, float] = {}
            for label, extra in runs:
                work = Path(tmp) / f"{round_}-{label.replace(' ', '_').replace(',', '')}"
                PHASE.clear()
                PREPARED.clear()  # each run cold, as a new process is (a Ray worker is)
                CACHE.clear()
                t0, cpu0, children = time.perf_counter(), time.process_time(), ChildCPU()
                report = run_task(_task(model_url, judge_url, data, work, **task_extra, **extra))
                wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
                profile[label] = children.stop()
                summary = report.dataset("general_vqa").summary
                assert summary.succeeded == args.n, summary
                sent[label] = {step: sum(e.billed.prompt_tokens for e in by_model.values())
                               for step, by_model in summary.usage.steps.items()}
                rates[label] = args.n / wall
                stream = PHASE.get("streaming")
                if stream:
                    rates[f"{label} streaming"] = args.n / stream
                shown = f"{stream:6.1f} s {args.n / stream:7.1f}/s" if stream else f"{'-':>22}"
                tokens = ", ".join(f"{step} {n / 1e6:.2f}M"
                                   for step, n in sorted(sent[label].items()))
                print(f"  {label:<18} {wall:6.1f} s {rates[label]:7.1f}/s  {shown}  {cpu:5.1f} s "
                      f"{1000 * cpu / args.n:7.2f} ms  {tokens}")
            ratios.append(_ratios(rates))
    ray.shutdown()
    print(f"load average after: {_load()}")
    print("CPU per sample by process (ms, the last round): driver, and the processes below it")
    for label, kinds in profile.items():
        print(f"  {label:<18} " + ", ".join(f"{k} {1000 * v / args.n:.2f}"
                                           for k, v in sorted(kinds.items())))
    assert len({tuple(sorted(t.items())) for t in sent.values()}) == 1, \
        f"the runs did not send the same requests: {sent}"
    for name in ratios[0]:
        each = [r[name] for r in ratios]
        rounds = f" (rounds: {', '.join(f'{x:.2f}' for x in each)})" if len(each) > 1 else ""
        print(f"  {name}: {statistics.median(each):.2f}x{rounds}")


def _ratios(rates: dict[str, float]) -> dict[str, float]:
    out = {}
    for kind in ("", " streaming"):
        one = rates[f"ray, 1 worker{kind}"]
        out[f"ray 1 worker / local{kind or ' end to end'}"] = one / rates[f"local (1 process){kind}"]
        out[f"2 workers / 1 worker{kind or ' end to end'}"] = rates[f"ray, 2 workers{kind}"] / one
    return out

if __name__ == "__main__":
    main()
