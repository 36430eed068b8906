"""Peak memory of a run against hostile replies: a gzip bomb and a 20 MB answer (hand-run).

    python benchmarks/bench_hostile_replies.py [--bomb-mb 300] [--samples 4]

A simulator (in this process, on loopback) answers every request with a reply whose content
is ``--bomb-mb`` MB of 'a', gzip-encoded on the fly (~1 KB on the wire per MB decoded), then
with a plain 20 MB answer. ``groundscope eval`` runs in a child process (``--ignore-errors``,
no retries, two requests in flight); printed: the child's peak RSS, the bytes it wrote to
the run directory, and the error kind of the first prediction. Point ``PYTHONPATH`` at
another ``src`` to measure another version against the same simulator.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

from groundscope.simulator import SimBehaviour, SimulatorServer

MB = 1024 * 1024


def dataset(root: Path, n: int) -> Path:
    rows = [{"id": f"s{i}", "answer": f"answer {i}",
             "messages": [{"role": "user", "content": f"question {i}?"}]} for i in range(n)]
    (root / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root / "data.jsonl"


def measure(behaviour: SimBehaviour, n: int) -> tuple[float, int, str]:
    with tempfile.TemporaryDirectory() as tmp, SimulatorServer(behaviour=behaviour) as url:
        data = dataset(Path(tmp), n)
        run = Path(tmp) / "run"
        args = {"general_vqa": {"local_path": str(data.parent), "subset_list": ["data"]}}
        cmd = [sys.executable, "-m", "groundscope", "eval", "--model", "m", "--api-url", url,
               "--datasets", "general_vqa", "--dataset-args", json.dumps(args), "--work-dir", str(run),
               "--no-timestamp", "--no-progress", "--ignore-errors", "--max-retries", "0",
               "--eval-batch-size", "2"]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        written = sum(p.stat().st_size for p in run.rglob("*") if p.is_file())
        preds = sorted(run.glob("predictions/*/*.jsonl"))
        first = json.loads(preds[0].read_text().splitlines()[0]) if preds else {}
        kind = first.get("error_kind") or first.get("status") or f"exit {proc.returncode}"
        return rss, written, kind


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bomb-mb", type=int, default=300)
    parser.add_argument("--samples", type=int, default=4)
    ns = parser.parse_args()
    # RUSAGE_CHILDREN's peak is over all children so far: the smaller case goes first.
    cases = [("20 MB answer", SimBehaviour(reply_bytes=20 * MB)),
             (f"{ns.bomb_mb} MB gzip bomb", SimBehaviour(reply_bytes=ns.bomb_mb * MB, reply_gzip=True))]
    for label, behaviour in cases:
        rss, written, kind = measure(behaviour, ns.samples)
        print(f"{label:<20} child peak RSS {rss:8.1f} MB   run dir {written / MB:8.2f} MB   "
              f"first sample: {kind}")


if __name__ == "__main__":
    main()
