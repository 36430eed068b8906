"""Throughput, client CPU and memory of a whole evaluation against the simulator.

Run by hand (not part of the test suite)::

    python benchmarks/bench_throughput.py            # all three parts
    python benchmarks/bench_throughput.py --part 1   # 0 ms latency, concurrency 1/8/32/128
    python benchmarks/bench_throughput.py --part 2   # 200 ms latency, fraction of ideal
                                                     # (steady state, pipeline, end to end)
    python benchmarks/bench_throughput.py --part 3   # peak RSS at N=2,000 and N=20,000

Each evaluation runs in a fresh process with ``run_task`` (load, request, score, store);
the simulator runs in another process so its CPU is not billed to the client.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from _common import make_vqa_dataset, run_eval_child, simulator_process


def part1(n: int) -> None:
    data = make_vqa_dataset(n)
    print(f"\n(1) N={n} VQA records, one ~100 KB JPEG each, simulator latency 0 ms")
    print("  samples/s end to end = N / wall time of run_task (imports, load, requests, scoring,")
    print("  store, reports, report.html); pipeline = N / the streaming phase alone")
    print(f"{'concurrency':>11} {'end-to-end/s':>13} {'pipeline/s':>11} {'client CPU ms/sample':>21}"
          f" {'peak RSS MB':>12}")
    with simulator_process(data) as url, tempfile.TemporaryDirectory() as tmp:
        for conc in (1, 8, 32, 128):
            r = run_eval_child(url, data, conc, Path(tmp) / f"c{conc}")
            assert r["succeeded"] == n, r
            print(f"{conc:>11} {n / r['wall']:>13.0f} {n / r['pipeline']:>11.0f} "
                  f"{1000 * r['cpu'] / n:>21.2f} {r['rss_mb']:>12.0f}")


def part2(n: int, latency_ms: float = 200.0, conc: int = 128) -> None:
    data = make_vqa_dataset(n, distinct=min(n, 2000))
    ideal = conc / (latency_ms / 1000.0)
    print(f"\n(2) N={n}, simulator latency {latency_ms:.0f} ms, concurrency {conc}")
    with simulator_process(data, latency_ms=latency_ms) as url, tempfile.TemporaryDirectory() as tmp:
        r = run_eval_child(url, data, conc, Path(tmp) / "lat")
    rates = (("steady state", r["steady_rate"]), ("pipeline", n / r["pipeline"]),
             ("end to end", n / r["wall"]))
    for label, rate in rates:
        print(f"  {label:>12}: {rate:.0f} samples/s of an ideal {ideal:.0f} = {rate / ideal:.1%}")
    waves = -(-n // conc)
    print(f"  ({n} samples in waves of {conc}: a pipeline cannot beat {waves} x {latency_ms:.0f} ms,"
          f" {n / (waves * latency_ms / 1000) / ideal:.1%} of ideal); peak RSS {r['rss_mb']:.0f} MB")


def part3(sizes: tuple[int, ...] = (2000, 20000), conc: int = 32) -> None:
    print(f"\n(3) peak RSS, concurrency {conc}, latency 0 ms")
    base = None
    for n in sizes:
        data = make_vqa_dataset(n, distinct=min(n, 2000))
        with simulator_process(data) as url, tempfile.TemporaryDirectory() as tmp:
            r = run_eval_child(url, data, conc, Path(tmp) / "rss")
        base = base or r["rss_mb"]
        print(f"  N={n:>6}: peak RSS {r['rss_mb']:.0f} MB ({r['rss_mb'] / base:.2f}x N={sizes[0]}), "
              f"{n / r['wall']:.0f} samples/s")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--part", type=int, choices=(1, 2, 3))
    ap.add_argument("-n", type=int, default=2000)
    args = ap.parse_args()
    if args.part in (None, 1):
        part1(args.n)
    if args.part in (None, 2):
        part2(args.n)
        part2(5 * args.n)  # ramp-up and the last, partly filled wave weigh less
    if args.part in (None, 3):
        part3()


if __name__ == "__main__":
    main()
