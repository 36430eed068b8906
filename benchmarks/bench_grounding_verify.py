"""Hand-run cost check of the two claim-verification modes on the README's grounding demo.

Runs examples/grounding_demo.yaml (the offline simulator, fresh run directories) once with
``judge.grounding.verify: per_claim`` and once with ``batch`` (``--votes`` / ``--models``
widen the panel), then prints per judge step the requests sent and the prompt / completion
tokens of their replies' ``usage``, and whether every reported metric agrees. A fresh run
sends each distinct judge request once and caches every reply with its usage in
``cache/<step>.jsonl``, so those files are the count (the simulator estimates tokens as
characters / 4 for text and a fixed count per image).

    python benchmarks/bench_grounding_verify.py [--votes 1] [--models 1]
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path
from typing import Any

import orjson
import yaml

from groundscope import run_task

ROOT = Path(__file__).resolve().parents[1]
STEPS = ("claims", "verification", "completeness", "equivalence")


def demo_config(work_dir: Path, verify: str, votes: int, models: int) -> dict[str, Any]:
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(ROOT / "examples" / "grounding")
    cfg["simulator"]["truth"] = str(ROOT / "examples" / "grounding" / "truth.json")
    judge = cfg["judge"]
    judge["models"] = [{"model_id": f"grounding-judge-{n}", "api_url": "mock"}
                       for n in range(models)]
    judge["grounding"].update(verify=verify, votes=votes)
    return {**cfg, "work_dir": str(work_dir), "no_timestamp": True}


def usage(run_dir: Path) -> dict[str, tuple[int, int, int]]:
    """Per step: (requests, prompt tokens, completion tokens) from the reply cache."""
    out = {}
    for step in STEPS:
        path = run_dir / "cache" / f"{step}.jsonl"
        rows = [orjson.loads(line) for line in path.read_bytes().splitlines()] \
            if path.exists() else []
        out[step] = (len(rows), sum(r["completion"]["usage"][0] for r in rows),
                     sum(r["completion"]["usage"][1] for r in rows))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--votes", type=int, default=1)
    parser.add_argument("--models", type=int, default=1)
    args = parser.parse_args()
    logging.disable(logging.INFO)  # the runs' own tables and summaries
    results, figures = {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("per_claim", "batch"):
            report = run_task(demo_config(Path(tmp) / mode, mode, args.votes, args.models))
            rep = report.dataset("general_vqa")
            results[mode] = {(r.metric, r.subset): r.score for r in rep.metrics}
            figures[mode] = usage(Path(tmp) / mode)
    print(f"grounding demo, votes {args.votes}, models {args.models}")
    print(f"{'mode':<10} {'step':<13} {'calls':>6} {'prompt tok':>11} {'compl. tok':>11}")
    for mode, steps in figures.items():
        for step, (calls, prompt, completion) in [*steps.items(),
                                                  ("all judges", _total(steps))]:
            print(f"{mode:<10} {step:<13} {calls:>6} {prompt:>11} {completion:>11}")
    agree = results["per_claim"] == results["batch"]
    print(f"every metric row equal in both modes: {agree}")


def _total(steps: dict[str, tuple[int, int, int]]) -> tuple[int, int, int]:
    calls, prompt, completion = zip(*steps.values(), strict=True)
    return sum(calls), sum(prompt), sum(completion)


if __name__ == "__main__":
    main()
