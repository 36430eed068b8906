"""`groundscope report RUN_DIR` re-aggregates exactly what the run would count."""

from __future__ import annotations

import json
from pathlib import Path

from groundscope import run_task
from groundscope.rescore import rebuild_report
from groundscope.simulator import SimulatorServer
from media_fixtures import image_bytes, write, write_jsonl


def _dataset(root: Path) -> Path:
    write(root, "a.jpg", image_bytes("JPEG", color="red"))
    write(root, "b.png", image_bytes("PNG", color="blue"))
    records = [{"id": f"q{i}", "answer": ["a red square", "a blue square"][i % 2],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": f"Question {i}: what is shown?"},
                    {"type": "image_url", "image_url": {"url": ["a.jpg", "b.png"][i % 2]}}]}]}
               for i in range(12)]
    write_jsonl(root / "data.jsonl", records)
    return root


def _rows(report) -> dict[tuple[str, str], tuple[int, float | None]]:
    return {(m.metric, m.subset): (m.num, m.score) for d in report.datasets for m in d.metrics}


def test_report_leaves_out_scores_of_metrics_dropped_on_resume(tmp_path: Path) -> None:
    data = _dataset(tmp_path / "data")
    cfg = {"model": "m", "datasets": ["general_vqa"], "work_dir": str(tmp_path / "out"),
           "dataset_args": {"general_vqa": {"local_path": str(data),
                                            "metric_list": ["bleu", "rouge"]}}}
    with SimulatorServer() as url:
        first = run_task({**cfg, "api_url": url})
        run_dir = Path(first.run_dir)
        assert any(metric.startswith("rouge") for metric, _ in _rows(first))
        cfg["dataset_args"]["general_vqa"]["metric_list"] = ["bleu"]
        resumed = run_task({**cfg, "api_url": url, "use_cache": str(run_dir)})
    reviews = (run_dir / "reviews" / "m").glob("*.jsonl")
    scorers = {json.loads(line)["scorer"] for f in reviews for line in f.read_text().splitlines()}
    assert scorers == {"bleu", "rouge"}  # the old ROUGE scores are still on disk
    rows = _rows(resumed)
    assert rows and not any(metric.startswith("rouge") for metric, _ in rows)
    assert _rows(rebuild_report(run_dir)) == rows


def test_report_says_when_its_page_cannot_be_written_and_exits_1(tmp_path: Path) -> None:
    """A run directory whose report.html is a directory (hostile, or a slip): the JSON
    reports are rebuilt, the page cannot be; report says so in one line and exits 1 (it
    exited 0 and printed "HTML report: .../report.html", the directory, as if written)."""
    from cli_support import run_cli

    data = _dataset(tmp_path / "data")
    cfg = {"model": "m", "datasets": ["general_vqa"], "work_dir": str(tmp_path / "out"),
           "dataset_args": {"general_vqa": {"local_path": str(data)}}}
    with SimulatorServer() as url:
        run_dir = Path(run_task({**cfg, "api_url": url}).run_dir)
    page = run_dir / "report.html"
    page.unlink()
    (page / "inside").mkdir(parents=True)
    json_report = next((run_dir / "reports").rglob("general_vqa.json"))
    json_report.unlink()
    done = run_cli("report", str(run_dir), cwd=tmp_path)
    assert done.returncode == 1, (done.stdout[-500:], done.stderr[-500:])
    assert "HTML report" not in done.stdout
    said = [line for line in done.stderr.splitlines() if "report.html" in line]
    assert len(said) == 1 and "could not write report.html" in said[0], done.stderr
    assert "Traceback" not in done.stderr
    assert json_report.is_file() and page.is_dir()  # the reports rebuilt; nothing lost
