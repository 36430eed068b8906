"""Where a run's first waves go: when each request went out and came back, when its score
started and ended, and when the English tokenizer was built (hand-run).

    python benchmarks/bench_waves.py                      # 200 ms latency, concurrency 128
    python benchmarks/bench_waves.py --latency-ms 0 --concurrency 32 -n 2000

One ``run_task`` in a fresh process against the simulator (in its own process), with the
times stamped from the call: a request as ``ChatClient._post`` starts and ends (the HTTP
round trip, after its record was read, its image checked and its body built), a score as
``pipeline._score`` starts and ends, the tokenizer as ``EnglishTokenizer`` is built. Prints
the stamps of the 1st, 16th, 32nd, ... request of the first three waves, the first score,
and the whole run against the ideal (``N / concurrency`` waves of the latency).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import make_vqa_dataset, simulator_process, source_env

CHILD = r"""
import json, sys, time
from groundscope import pipeline as P, run_task
from groundscope.client import chat as C
from groundscope.scoring import english as E
events, t0 = [], time.perf_counter()
def stamp(kind):
    events.append((time.perf_counter() - t0, kind))
post = C.ChatClient._post
async def timed_post(self, *args, **kwargs):
    stamp("request out")
    try:
        return await post(self, *args, **kwargs)
    finally:
        stamp("answer back")
C.ChatClient._post = timed_post
score = P._score
async def timed_score(*args, **kwargs):
    stamp("score start")
    try:
        return await score(*args, **kwargs)
    finally:
        stamp("score end")
P._score = timed_score
build = E.EnglishTokenizer.__init__
def timed_build(self, *args, **kwargs):
    stamp("tokenizer build start")
    build(self, *args, **kwargs)
    stamp("tokenizer built")
E.EnglishTokenizer.__init__ = timed_build
cfg = json.loads(sys.argv[1])
t0 = time.perf_counter()
run_task(cfg)
stamp("run_task returned")
print(json.dumps(events))
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="samples (2,000)")
    ap.add_argument("--latency-ms", type=float, default=200.0)
    ap.add_argument("--concurrency", type=int, default=128)
    args = ap.parse_args()
    data = make_vqa_dataset(args.n)
    with simulator_process(data, latency_ms=args.latency_ms) as url, \
            tempfile.TemporaryDirectory() as tmp:
        cfg = {"model": "sim", "api_url": url, "datasets": ["general_vqa"],
               "dataset_args": {"general_vqa": {"local_path": str(data),
                                                "subset_list": ["bench"]}},
               "eval_batch_size": args.concurrency, "work_dir": str(Path(tmp) / "run"),
               "ignore_errors": True}
        out = subprocess.run([sys.executable, "-c", CHILD, json.dumps(cfg)], capture_output=True,
                             text=True, check=True, env=source_env(None))
    events = json.loads(out.stdout.strip().splitlines()[-1])
    seen: dict[str, int] = {}
    shown = {1, 16, 32, 64, 96}
    c = args.concurrency
    marks = {k * c + i for k in range(3) for i in shown} | {k * c for k in (1, 2, 3)}
    for t, kind in sorted(events):
        seen[kind] = seen.get(kind, 0) + 1
        first = kind.startswith(("tokenizer", "run_task", "score")) and seen[kind] == 1
        if first or (kind.startswith(("request", "answer")) and seen[kind] in marks):
            print(f"{t:7.3f} s  {kind} #{seen[kind]}")
    total = events[-1][0]
    ideal = args.n / args.concurrency * args.latency_ms / 1000
    if ideal:
        print(f"whole run {total:.3f} s against the ideal {ideal:.3f} s: {ideal / total:.1%}")


if __name__ == "__main__":
    main()
