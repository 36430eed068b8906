"""The regression guard: the working tree against another commit, interleaved (hand-run).

    python benchmarks/bench_ab.py HEAD~3              # 3 pairs each, N=2,000
    python benchmarks/bench_ab.py main --pairs 5 -n 4000

The commit's ``src/`` is exported (``git archive``) to a temporary folder; each run is a
fresh process importing groundscope from one of the two copies (``PYTHONPATH``), against one
simulator process shared by both, so the only difference is the code under test. The runs
alternate A B B A A B ... and each pair's ratio is taken, so a machine that drifts during
the comparison moves both sides of a pair alike, and neither side always runs second. With
6 pairs or more a 95 % interval of the median ratio is printed (distribution-free: order
statistics). On this machine, whose runs vary by +-10 %, 16 pairs of the same code against
itself gave 0.981-1.046 for the throughput and 0.949-1.022 for the CPU per sample (0 ms,
2026-12-06): a change smaller than ~5 % needs more pairs than that to show. Three
workloads, the per-sample path's three regimes:

- 0 ms latency, concurrency 32: the client's own CPU is the bottleneck (samples/s, CPU per
  sample, peak RSS). The CPU is shown for the whole run and for the streaming phase alone
  (the per-sample path: the imports before it and the reports and page after it left out);
- 200 ms latency, concurrency 128: the client must keep the endpoint busy (end-to-end share
  of the ideal 640/s);
- start-up: ``groundscope eval ... --limit 1`` as a user types it, wall seconds.

Ratios are tree / commit: above 1 is faster (rates) or slower (seconds, CPU, RSS) in the
tree. Run it before stopping on every change that touches the per-sample path.

``--tree-env NAME=VALUE`` sets a variable for the tree's runs alone: against ``HEAD`` it
compares the same code with and without a setting, e.g. a fixed glibc mmap threshold
(``MALLOC_MMAP_THRESHOLD_=300000``; README, "Where the targets of issue 21 stand").

Peak RSS at 200 ms / concurrency 128 moves with the allocator more than with the code: 14
runs of one commit gave 100-139 MB (2026-12-05). A "worse by over 5%" there with 3 pairs
is a reason to run more pairs (``--part 200ms --pairs 6``), not yet a finding.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import make_vqa_dataset, median_interval, run_eval_child, simulator_process, source_env

REPO = Path(__file__).resolve().parent.parent


def export_src(commit: str, dest: Path) -> Path:
    """``commit``'s ``src/`` under ``dest`` (``git archive``, nothing else of the repo)."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", "--format=tar", commit, "src"],
                             capture_output=True, check=True).stdout
    dest.mkdir(parents=True, exist_ok=True)
    tar = dest / "src.tar"
    tar.write_bytes(archive)
    with tarfile.open(tar) as t:
        t.extractall(dest, filter="data")
    tar.unlink()
    compile_src(dest / "src")
    return dest / "src"


def compile_src(src: Path) -> None:
    """Bytecode for ``src`` (with PYTHONDONTWRITEBYTECODE set, each run would compile the
    modules changed since the last compileall again: ~0.2 s of start-up that is not the code's)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(src)], check=True)


def imported_from(src: Path) -> str:
    """Where a child process with ``src`` first on its path imports groundscope from."""
    out = subprocess.run([sys.executable, "-c", "import groundscope; print(groundscope.__file__)"],
                         capture_output=True, text=True, check=True, env=source_env(src))
    return out.stdout.strip()


Figures = dict[str, float]


def interleaved(label: str, pairs: int, run: Callable[[str, Path], Figures],
                sides: dict[str, Path], higher_is_better: dict[str, bool]) -> None:
    """``pairs`` runs of each side, the order turned round every pair (A B, B A, A B ...,
    so neither side always runs second), then each figure's medians, the per-pair ratios
    (tree / commit) and a 95 % interval of their median (``_common.median_interval``,
    from 6 pairs)."""
    got: dict[str, list[Figures]] = {name: [] for name in sides}
    for i in range(pairs):
        for name in (list(sides) if i % 2 == 0 else list(sides)[::-1]):
            got[name].append(run(name, sides[name]))
    print(f"\n{label}  ({pairs} interleaved pairs)")
    print(f"  {'figure':<26} {'commit':>10} {'tree':>10} {'tree/commit min/median/max':>30}"
          f" {'95% CI of the median':>21}")
    for key, better_high in higher_is_better.items():
        a = [f[key] for f in got["commit"]]
        b = [f[key] for f in got["tree"]]
        ratios = sorted(y / x for x, y in zip(a, b, strict=True) if x)
        verdict = ""
        if ratios:
            med = statistics.median(ratios)
            worse = med < 0.95 if better_high else med > 1.05
            verdict = "  <- worse by over 5%" if worse else ""
        span = (f"{ratios[0]:.3f} / {statistics.median(ratios):.3f} / {ratios[-1]:.3f}"
                if ratios else "n/a")
        interval = median_interval(ratios)
        shown = f"{interval[0]:.3f} - {interval[1]:.3f}" if interval else "n/a"
        print(f"  {key:<26} {statistics.median(a):>10.3f} {statistics.median(b):>10.3f} "
              f"{span:>30} {shown:>21}{verdict}")


def eval_workload(url: str, data: Path, n: int, conc: int, ideal: float | None,
                  tmp: Path, envs: dict[str, dict[str, str]]) -> Callable[[str, Path], Figures]:
    counter = iter(range(1_000_000))

    def run(name: str, src: Path) -> Figures:
        r = run_eval_child(url, data, conc, tmp / f"{name}{next(counter)}", src=src,
                           env=envs.get(name))
        if r["succeeded"] != n:
            raise SystemExit(f"{name}: {r['succeeded']} of {n} samples succeeded: {r}")
        figures = {"samples/s end to end": n / r["wall"],
                   "samples/s streaming": n / r["pipeline"],
                   "client CPU ms/sample": 1000 * r["cpu"] / n,
                   "  streaming phase alone": 1000 * r["pipeline_cpu"] / n,
                   "peak RSS MB": r["rss_mb"]}
        if ideal:
            figures["end to end / ideal"] = n / r["wall"] / ideal
        return figures
    return run


def startup_workload(url: str, data: Path, tmp: Path,
                     envs: dict[str, dict[str, str]]) -> Callable[[str, Path], Figures]:
    counter = iter(range(1_000_000))
    args = json.dumps({"general_vqa": {"local_path": str(data), "subset_list": ["bench"]}})

    def run(name: str, src: Path) -> Figures:
        cmd = [sys.executable, "-m", "groundscope", "eval", "--model", "sim", "--api-url", url,
               "--datasets", "general_vqa", "--dataset-args", args, "--limit", "1",
               "--work-dir", str(tmp / f"s{name}{next(counter)}")]
        start = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True, env=source_env(src, envs.get(name)))
        return {"seconds, --limit 1": time.perf_counter() - start}
    return run


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("commit", help="the commit to compare the working tree with (e.g. main, HEAD~2)")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs per workload (3)")
    ap.add_argument("-n", type=int, default=2000, help="samples per evaluation (2,000)")
    ap.add_argument("--part", choices=("0ms", "200ms", "startup"), action="append",
                    help="only these workloads (repeatable; default: all three)")
    ap.add_argument("--tree-env", action="append", default=[], metavar="NAME=VALUE",
                    help="a variable set for the tree's runs alone (repeatable)")
    args = ap.parse_args()
    if any(not item.partition("=")[0] or "=" not in item for item in args.tree_env):
        ap.error("--tree-env takes NAME=VALUE")
    tree_env = dict(item.partition("=")[::2] for item in args.tree_env)
    envs = {"tree": tree_env}
    parts = args.part or ["0ms", "200ms", "startup"]
    rates = {"samples/s end to end": True, "samples/s streaming": True,
             "client CPU ms/sample": False,
             "  streaming phase alone": False, "peak RSS MB": False}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sides = {"commit": export_src(args.commit, tmp / "commit"), "tree": REPO / "src"}
        compile_src(sides["tree"])
        for name, src in sides.items():
            print(f"{name}: groundscope from {imported_from(src)}")
        if tree_env:
            print("tree's runs with " + " ".join(f"{k}={v}" for k, v in tree_env.items()))
        data = make_vqa_dataset(args.n)
        if "0ms" in parts:
            with simulator_process(data) as url:
                interleaved(f"0 ms latency, concurrency 32, N={args.n}", args.pairs,
                            eval_workload(url, data, args.n, 32, None, tmp, envs), sides, rates)
        if "200ms" in parts:
            with simulator_process(data, latency_ms=200) as url:
                interleaved(f"200 ms latency, concurrency 128, N={args.n} (ideal 640/s)",
                            args.pairs, eval_workload(url, data, args.n, 128, 640.0, tmp, envs), sides,
                            {**rates, "end to end / ideal": True})
        if "startup" in parts:
            with simulator_process(data) as url:
                interleaved("start-up: groundscope eval --limit 1 (whole command)",
                            max(args.pairs, 5), startup_workload(url, data, tmp, envs), sides,
                            {"seconds, --limit 1": False})


if __name__ == "__main__":
    main()
