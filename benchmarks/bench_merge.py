"""`groundscope merge` and `groundscope report` on big shards: time and peak RSS.

Two shards of one real mock run (two records), whose predictions and reviews files are then
grown to ROWS predictions in all (half per shard, each prediction with its reviews) by
copies of their rows under new sample ids: valid rows, as groundscope writes them. Each
step runs in its own process, which reports its own peak RSS (``ru_maxrss``).

    .venv/bin/python benchmarks/bench_merge.py 20000 200000
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from _common import CACHE

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from merge_support import grow, real_shards

_STEP = """
import resource, sys, time
t = time.perf_counter()
from groundscope import merge_runs
from groundscope.rescore import rebuild_report
if sys.argv[1] == "merge":
    r = merge_runs(sys.argv[3:], sys.argv[2])
    print(r.run_dir)
else:
    rebuild_report(sys.argv[2])
print(time.perf_counter() - t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def _step(*args: str) -> tuple[list[str], float, float]:
    done = subprocess.run([sys.executable, "-c", _STEP, *args], capture_output=True, text=True,
                          check=True)
    *out, last = done.stdout.strip().splitlines()
    seconds, rss_mb = map(float, last.split())
    return out, seconds, rss_mb


def bench(rows: int) -> None:
    base = CACHE / f"merge_{rows}"
    shutil.rmtree(base, ignore_errors=True)
    shards = real_shards(base)
    for shard in shards:
        grow(shard, rows // 2)
    size = sum(f.stat().st_size for s in shards for f in (s / "predictions").rglob("*.jsonl"))
    (run_dir,), merge_s, merge_mb = _step("merge", str(base / "merged"), *map(str, shards))
    _, report_s, report_mb = _step("report", run_dir)
    print(json.dumps({"rows": rows, "predictions_mb": round(size / 1e6, 1),
                      "merge_s": round(merge_s, 1), "merge_peak_rss_mb": round(merge_mb),
                      "report_s": round(report_s, 1), "report_peak_rss_mb": round(report_mb)}))
    shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    for n in sys.argv[1:] or ["20000", "200000"]:
        bench(int(n))
