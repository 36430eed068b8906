"""Video as frames (``--video-frames 8``) against the same frames sent as an image dataset.

Run by hand (not part of the test suite; needs PyAV, ``pip install -e '.[video]'``)::

    python benchmarks/bench_video_frames.py              # 100 clips, 200 ms and 0 ms
    python benchmarks/bench_video_frames.py --clips 200 --concurrency 32

Makes N short clips with PyAV (3 s, 10 fps, 320x240, MPEG-4, a keyframe every 10 frames,
each clip its own colours) and the 8 frames of each that ``--video-frames 8`` sends,
pre-extracted as JPEGs into an image dataset (8 ``<image k>`` per record). Each
evaluation runs in a fresh process (``run_task``: load, request, score, store, reports);
the simulator runs in its own process at the given latency. Reported:

1. samples/s with ``--video-frames 8`` vs the image dataset (target: >= 80% of it);
2. decodes: with ``repeats=2`` and a multimodal LLM judge, every clip is decoded once
   (``client.mediaprep.PREPARED.conversions``), however many requests carry its frames;
3. thread pool vs process pool vs one thread, decoding the N clips alone: why the client
   decodes in threads.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import simulator_process, write_clip

FRAMES = 8
SIDE = 768

CHILD = r"""
import json, sys, time
from groundscope import run_task
from groundscope import runner as R
from groundscope.client.mediaprep import PREPARED
marks = {}
_evaluate = R.Runner._evaluate
async def timed(self, client):  # the pipeline phase alone: load, request, score, store
    marks["start"] = time.perf_counter()
    await _evaluate(self, client)
    marks["end"] = time.perf_counter()
R.Runner._evaluate = timed
cfg = json.loads(sys.argv[1])
t0 = time.perf_counter()
report = run_task(cfg)
wall = time.perf_counter() - t0
s = report.dataset("general_vqa").summary
print(json.dumps({"wall": wall, "pipeline": marks["end"] - marks["start"],
                  "succeeded": s.succeeded, "errored": s.errored,
                  "decodes": PREPARED.conversions.get("video", 0)}))
"""


def make_clips(root: Path, n: int) -> Path:
    """N clips and the same clips' 8 frames as images: ``clips.jsonl`` and ``frames.jsonl``."""
    from groundscope.media.decode import sample_frames

    clips, frames = [], []
    for i in range(n):
        out = root / f"clip{i:03d}.mp4"
        write_clip(out, i)
        clips.append({"id": f"c{i}", "messages": [{"role": "user", "content":
                      "What happens in <video 1>?"}], "video_1": out.name, "answer": "a band"})
        jpegs = sample_frames(out.read_bytes(), out.name, count=FRAMES, fps=None,
                              max_pixels=10**8, side=SIDE)
        record = {"id": f"c{i}", "answer": "a band", "messages": [{"role": "user", "content":
                  "What happens in " + "".join(f"<image {k + 1}>" for k in range(FRAMES)) + "?"}]}
        for k, jpeg in enumerate(jpegs):
            (root / f"clip{i:03d}_{k}.jpg").write_bytes(jpeg)
            record[f"image_{k + 1}"] = f"clip{i:03d}_{k}.jpg"
        frames.append(record)
    for name, rows in (("clips", clips), ("frames", frames)):
        (root / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root


def run_child(url: str, data: Path, subset: str, work: Path, concurrency: int,
              **extra: object) -> dict[str, float]:
    cfg = {"model": "sim", "api_url": url, "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(data), "subset_list": [subset]}},
           "work_dir": str(work), "eval_batch_size": concurrency, **extra}
    proc = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True,
                          text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def compare(data: Path, n: int, latency_ms: float, concurrency: int, rounds: int) -> None:
    print(f"\n(1) {n} clips, simulator latency {latency_ms:.0f} ms, concurrency {concurrency}, "
          f"best of {rounds} (fresh process each)")
    best: dict[str, float] = {}
    with simulator_process(data, latency_ms=latency_ms, subset="clips") as url, \
            tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):  # interleaved: the machine's load hits both alike
            for label, subset, extra in (("video frames", "clips", {"video_frames": FRAMES}),
                                         ("images alone", "frames", {})):
                got = run_child(url, data, subset, Path(tmp) / f"{subset}{r}", concurrency,
                                **extra)
                assert got["succeeded"] == n, got
                for phase in ("pipeline", "wall"):
                    key = f"{label}|{phase}"
                    best[key] = min(best.get(key, float("inf")), got[phase])
    print("  samples/s: pipeline = the streaming phase (load, decode, request, score, store);")
    print("  end to end = run_task's wall time (+ reports and report.html)")
    for label in ("video frames", "images alone"):
        pipe, wall = best[f"{label}|pipeline"], best[f"{label}|wall"]
        print(f"  {label:>12}: pipeline {n / pipe:6.1f}/s ({pipe:.2f} s), end to end "
              f"{n / wall:6.1f}/s ({wall:.2f} s)")
    for phase in ("pipeline", "wall"):
        ratio = best[f"images alone|{phase}"] / best[f"video frames|{phase}"]
        print(f"  video frames at {ratio:.0%} of the images' rate ({phase}; target >= 80%)")


def decodes(data: Path, n: int, concurrency: int) -> None:
    print(f"\n(2) decodes with repeats=2 and a multimodal LLM judge ({n} clips)")
    with simulator_process(data, subset="clips") as url, tempfile.TemporaryDirectory() as tmp:
        got = run_child(url, data, "clips", Path(tmp) / "judged", concurrency, repeats=2,
                        video_frames=FRAMES,
                        judge={"strategy": "llm", "multimodal": True,
                               "models": {"model_id": "judge", "api_url": url}})
    print(f"  {2 * n} model requests + {2 * n} judge requests carried frames; clips decoded: "
          f"{got['decodes']} (each once: {got['decodes'] == n})")
    assert got["decodes"] == n, got


def _decode(path: str) -> int:
    from groundscope.media.decode import sample_frames

    data = Path(path).read_bytes()
    return len(sample_frames(data, path, count=FRAMES, fps=None, max_pixels=10**8, side=SIDE))


def pools(data: Path, n: int, workers: int = 2, rounds: int = 3) -> None:
    print(f"\n(3) decoding the {n} clips alone (8 frames each), {workers} workers, best of {rounds}")
    paths = [str(p) for p in sorted(data.glob("clip*.mp4"))]
    results: dict[str, float] = {}
    for _ in range(rounds):
        t = time.perf_counter()
        for p in paths:
            _decode(p)
        results["one thread"] = min(results.get("one thread", 1e9), time.perf_counter() - t)
        for label, cls in (("thread pool", concurrent.futures.ThreadPoolExecutor),
                           ("process pool", concurrent.futures.ProcessPoolExecutor)):
            with cls(workers) as pool:
                list(pool.map(_decode, paths[:workers]))  # warm: imports, process start
                t = time.perf_counter()
                list(pool.map(_decode, paths))
                results[label] = min(results.get(label, 1e9), time.perf_counter() - t)
    for label, secs in results.items():
        print(f"  {label:>12}: {secs:.2f} s ({1000 * secs / len(paths):.1f} ms per clip)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--clips", type=int, default=100)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        data = make_clips(Path(tmp), args.clips)
        print(f"made {args.clips} clips and their {FRAMES * args.clips} frames in "
              f"{time.perf_counter() - t:.1f} s")
        for latency in (200.0, 0.0):
            compare(data, args.clips, latency, args.concurrency, args.rounds)
        decodes(data, args.clips, args.concurrency)
        pools(data, args.clips)


if __name__ == "__main__":
    main()
