"""groundscope against EvalScope, both CLIs as a user types them, one simulator (hand-run).

    python benchmarks/bench_vs_evalscope.py --evalscope /path/to/venv/bin/evalscope
    python benchmarks/bench_vs_evalscope.py --evalscope ... --latency-ms 200 --concurrency 128

The same General-VQA dataset (N records, one 100 KB JPEG each, ``_common.make_vqa_dataset``)
is evaluated by ``groundscope eval`` and ``evalscope eval`` with the same flags (``--model``,
``--api-url``, ``--datasets general_vqa``, ``--dataset-args``, ``--eval-batch-size``), from the
dataset's folder (EvalScope resolves a relative image path against the working directory),
against one ``groundscope simulate`` process in its own process (its CPU is billed to
neither). The runs alternate groundscope, EvalScope, groundscope, ... and each pair's ratio
is taken. Each command is timed whole (imports, requests, scoring, reports, exit); its CPU
and peak RSS come from ``wait4`` (the command's own process, not the simulator).

EvalScope is not a dependency of groundscope: install it into a venv of its own
(``pip install evalscope==1.14.1``) and pass its ``evalscope`` executable.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import make_vqa_dataset, simulator_process

Figures = dict[str, float]


def timed(cmd: list[str], cwd: Path) -> Figures:
    """Run ``cmd`` to its end: wall s, CPU s (user + system) and peak RSS MB of its process."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "TERM": "dumb"})
    assert proc.stderr is not None
    err = proc.stderr.read()  # drained while it runs: a full pipe would stall it
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-5:]
        raise SystemExit(f"{cmd[0]} exited {proc.returncode}:\n" + "\n".join(tail))
    return {"wall s": wall, "CPU s": usage.ru_utime + usage.ru_stime,
            "peak RSS MB": usage.ru_maxrss / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--evalscope", default=shutil.which("evalscope"),
                    help="the evalscope executable (default: the one on PATH)")
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("-n", type=int, default=2000)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency-ms", type=float, default=0.0)
    args = ap.parse_args()
    if not args.evalscope:
        raise SystemExit("no evalscope executable: pass --evalscope PATH")
    data = make_vqa_dataset(args.n)
    dataset_args = json.dumps({"general_vqa": {"local_path": str(data), "subset_list": ["bench"]}})
    results: dict[str, list[Figures]] = {"groundscope": [], "evalscope": []}
    with simulator_process(data, latency_ms=args.latency_ms) as url, \
            tempfile.TemporaryDirectory() as tmp:
        common = ["eval", "--model", "sim", "--api-url", url, "--datasets", "general_vqa",
                  "--dataset-args", dataset_args, "--eval-batch-size", str(args.concurrency)]
        commands = {
            "groundscope": [sys.executable, "-m", "groundscope", *common],
            "evalscope": [args.evalscope, *common, "--api-key", "EMPTY",
                          "--eval-type", "openai_api"],
        }
        for pair in range(args.pairs):
            for name, cmd in commands.items():
                work = Path(tmp) / f"{name}{pair}"
                results[name].append(timed([*cmd, "--work-dir", str(work)], cwd=data))
                shutil.rmtree(work, ignore_errors=True)
                print(f"pair {pair + 1} {name:<12} " + "  ".join(
                    f"{k} {v:.2f}" for k, v in results[name][-1].items()), flush=True)
    print(f"\nN={args.n}, concurrency {args.concurrency}, {args.latency_ms:g} ms latency, "
          f"{args.pairs} interleaved pairs (medians)")
    print(f"  {'figure':<14} {'groundscope':>12} {'evalscope':>12}")
    for key in ("wall s", "CPU s", "peak RSS MB"):
        g, e = (statistics.median(r[key] for r in results[n]) for n in results)
        print(f"  {key:<14} {g:>12.2f} {e:>12.2f}")
    ratios = sorted(e["wall s"] / g["wall s"]
                    for g, e in zip(results["groundscope"], results["evalscope"], strict=True))
    print(f"  throughput, groundscope / EvalScope: min {ratios[0]:.2f}x, "
          f"median {statistics.median(ratios):.2f}x, max {ratios[-1]:.2f}x")


if __name__ == "__main__":
    main()
