"""Size and build time of ``report.html`` (and of a two-run comparison) for a large run.

Runs a real evaluation of N General-VQA records (one ~100 KB JPEG each, ``--distinct``
different files) against the built-in simulator, then times ``write_html`` on the run
directory (best of ``--repeat``) and reports the page size, the embedded thumbnails, and
the time of ``compare_runs`` + the comparison page for two such runs.

    python benchmarks/bench_html_report.py [--n 10000] [--distinct 2000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from _common import make_vqa_dataset


def _run(data: Path, work: Path, accuracy: float) -> Path:
    from groundscope import run_task

    cfg = {"eval_type": "mock", "model": "sim", "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(data), "subset_list": ["bench"]}},
           "eval_batch_size": 64, "work_dir": str(work), "no_timestamp": True,
           "ignore_errors": True, "simulator": {"accuracy": accuracy}}
    started = time.perf_counter()
    report = run_task(cfg)
    print(f"  evaluation (accuracy {accuracy}): {time.perf_counter() - started:.1f} s, "
          f"{report.datasets[0].summary.succeeded} answered")
    return Path(report.run_dir)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--distinct", type=int, default=2_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    from groundscope.report.compare import compare_runs
    from groundscope.report.compare_html import write_comparison
    from groundscope.report.html import write_html
    from groundscope.report.rundata import load_run

    data = make_vqa_dataset(args.n, distinct=args.distinct)
    with tempfile.TemporaryDirectory() as tmp:
        print(f"N={args.n} records, {args.distinct} distinct ~100 KB JPEGs")
        run_a = _run(data, Path(tmp) / "a", 0.8)
        run_b = _run(data, Path(tmp) / "b", 0.6)
        times = []
        for _ in range(args.repeat):
            started = time.perf_counter()
            page = write_html(run_a)
            times.append(time.perf_counter() - started)
        text = page.read_text()
        thumbs = text.count("data:image/jpeg;base64,")
        samples = sum(1 for _ in load_run(run_a).samples())
        print(f"report.html: {page.stat().st_size / 1e6:.1f} MB for {samples} samples, "
              f"{thumbs} thumbnails; build {min(times):.2f} s (best of {args.repeat}), "
              f"runs {', '.join(f'{t:.2f}' for t in times)} s")
        started = time.perf_counter()
        cmp = compare_runs([run_a, run_b])
        out = write_comparison(cmp, Path(tmp) / "comparison.html")
        print(f"comparison: {time.perf_counter() - started:.2f} s, {len(cmp.rows)} rows, "
              f"{len(cmp.disagreements)} disagreements, page {out.stat().st_size / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
