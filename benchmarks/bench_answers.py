"""Grading answers already made (``--answers``) against a 0 ms model run of the same data.

Run by hand (not part of the test suite)::

    python benchmarks/bench_answers.py            # N = 10,000
    python benchmarks/bench_answers.py -n 2000

(1) a model run: N General-VQA records (one ~100 KB JPEG each, 2,000 distinct), the
simulator at 0 ms latency in its own process, BLEU/ROUGE, concurrency 32; (2) the same
records graded from that run's saved answers (``answers: <run dir>``, ``eval_type
answers``): no endpoint at all. Each runs in a fresh process (``_common.run_child``); both
must give the same ROUGE-L recall. The answers run must be at least as fast.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from _common import make_vqa_dataset, run_child, run_eval_child, simulator_process


def rouge(work_dir: Path) -> float:
    report = next(work_dir.rglob("reports/*/general_vqa.groundscope.json"))
    rows = json.loads(report.read_text())["metrics"]
    return next(r["score"] for r in rows if r["metric"] == "rouge-l-r")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=32)
    args = ap.parse_args()
    n, conc = args.n, args.concurrency
    data = make_vqa_dataset(n, distinct=min(n, 2000))
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "model"
        with simulator_process(data) as url:
            model = run_eval_child(url, data, conc, model_dir)
        run_dir = next(p.parent for p in model_dir.rglob("config.json"))
        answers = run_child({"answers": str(run_dir), "model": "sim", "datasets": ["general_vqa"],
                             "dataset_args": {"general_vqa": {"local_path": str(data),
                                                              "subset_list": ["bench"]}},
                             "eval_batch_size": conc, "work_dir": str(Path(tmp) / "answers")})
        assert model["succeeded"] == answers["succeeded"] == n, (model, answers)
        same = rouge(model_dir) == rouge(Path(tmp) / "answers")
    print(f"N={n} VQA records, BLEU/ROUGE, concurrency {conc}")
    print(f"{'run':>22} {'end-to-end/s':>13} {'pipeline/s':>11} {'client CPU ms/sample':>21}")
    for label, r in (("model, 0 ms simulator", model), ("answers, no endpoint", answers)):
        print(f"{label:>22} {n / r['wall']:>13.0f} {n / r['pipeline']:>11.0f} "
              f"{1000 * r['cpu'] / n:>21.2f}")
    print(f"  answers / model end to end: {model['wall'] / answers['wall']:.2f}x; "
          f"same ROUGE-L recall: {same}")


if __name__ == "__main__":
    main()
