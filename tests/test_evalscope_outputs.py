"""The run directory's files that scripts written for EvalScope read (issue 13, item 8):
``reports/<model_id>/<dataset>.json`` in EvalScope's report schema and
``configs/task_config.yaml``; groundscope's own report is ``<dataset>.groundscope.json``.

The schema below restates EvalScope's report models field for field (EvalScope v1.10.0,
``evalscope/report/report.py``: ``Subset``, ``Category``, ``Metric``, ``Report``), including
what their validators do on load: subset scores rounded to 4 decimals, a category's and a
metric's num / score / macro_score recomputed from what they hold (sample-weighted and plain
means, ``evalscope/metrics/utils/functions.py``), the report's score set to the first metric's.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, Field, model_validator

from cli_support import EXAMPLES, run_cli
from groundscope import run_task
from groundscope.compat import report_metric_name
from groundscope.metrics import OVERALL
from groundscope.report.compare import compare_runs
from groundscope.report.model import DatasetReport, Report
from groundscope.report.rundata import load_run

MODEL = "Qwen/Qwen2.5-VL-7B-Instruct"  # EvalScope's model_id: the last path part
MODEL_ID = "Qwen2.5-VL-7B-Instruct"
SECRET = "sk-evalscope-outputs-0123456789"


def _micro(items: list[Any]) -> float:
    total = sum(i.num for i in items)
    return round(sum(i.score * i.num for i in items) / total, 4) if total else 0.0


def _macro(items: list[Any]) -> float:
    return round(sum(i.score for i in items) / len(items), 4) if items else 0.0


class ESSubset(BaseModel):
    name: str = "default_subset"
    score: float = 0.0
    num: int = 0
    is_aggregate: bool = False

    @model_validator(mode="after")
    def _round(self) -> ESSubset:
        self.score = round(self.score, 4)
        return self


class ESCategory(BaseModel):
    name: tuple[str, ...] = ()
    num: int = 0
    score: float = 0.0
    macro_score: float = 0.0
    subsets: list[ESSubset] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aggregate(self) -> ESCategory:
        real = [s for s in self.subsets if not s.is_aggregate]
        self.num = sum(s.num for s in real)
        self.score, self.macro_score = _micro(real), _macro(real)
        return self


class ESMetric(BaseModel):
    name: str = "default_metric"
    num: int = 0
    score: float = 0.0
    macro_score: float = 0.0
    categories: list[ESCategory] = Field(default_factory=list)

    @model_validator(mode="after")
    def _aggregate(self) -> ESMetric:
        real = [c for c in self.categories if c.num > 0]
        self.num = sum(c.num for c in real)
        self.score, self.macro_score = _micro(real), _macro(real)
        return self


class ESReport(BaseModel):
    name: str = "default_report"
    dataset_name: str = "default_dataset"
    dataset_pretty_name: str = ""
    dataset_description: str = ""
    model_name: str = "default_model"
    score: float = 0.0
    metrics: list[ESMetric] = Field(default_factory=list)
    analysis: str = "N/A"
    perf_metrics: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _score(self) -> ESReport:
        if self.metrics:
            self.score = self.metrics[0].score
        return self


# EvalScope HEAD (schema 2, evalscope/report/report.py) forbids unknown report and metric
# keys; its v1 migration (metrics/semantics/migration.py) drops num / score /
# metric_schema_version / primary_metric_name and renames a metric's name.
HEAD_REPORT_KEYS = {"schema_version", "name", "dataset_name", "dataset_pretty_name",
                    "dataset_description", "model_name", "metrics", "analysis", "perf_metrics",
                    "primary_metric_identity", "judge_summary", "execution_summary"}
HEAD_MIGRATED_AWAY = {"num", "score", "metric_schema_version", "primary_metric_name"}
V1_METRIC_KEYS = {"name", "num", "score", "macro_score", "categories"}


def is_report_json(data: Any) -> bool:
    """EvalScope's test of whether a JSON file under reports/ is a report
    (``evalscope/report/combinator.py``, ``_is_report_json``)."""
    if not isinstance(data, dict) or not all(k in data for k in ("name", "dataset_name",
                                                                   "model_name")):
        return False
    return ((isinstance(data.get("metrics"), list) and len(data["metrics"]) > 0)
            or isinstance(data.get("perf_metrics"), dict)
            or isinstance(data.get("execution_summary"), dict))


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Report]:
    out = tmp_path_factory.mktemp("es") / "run"
    cfg = yaml.safe_load((EXAMPLES / "demo.yaml").read_text())
    for args in cfg["dataset_args"].values():
        args["local_path"] = str(EXAMPLES / Path(args["local_path"]).name)
    cfg |= {"model": MODEL, "api_key": SECRET, "work_dir": str(out), "no_timestamp": True,
            "simulator": {"accuracy": 0.6, "seed": 3}}
    report = run_task(cfg)
    return out, report


def _load(run_dir: Path, dataset: str) -> dict[str, Any]:
    return json.loads((run_dir / "reports" / MODEL_ID / f"{dataset}.json").read_text())


@pytest.mark.parametrize("dataset", ["general_vqa", "general_vmcq", "legacy_mcq"])
def test_report_file_has_evalscopes_schema_and_our_numbers(run, dataset: str) -> None:
    run_dir, report = run
    raw = _load(run_dir, dataset)
    ours: DatasetReport = report[dataset]
    es = ESReport.model_validate(raw)
    assert (es.name, es.dataset_name, es.model_name) == (f"{MODEL_ID}@{dataset}", dataset, MODEL_ID)
    assert es.dataset_pretty_name == ours.pretty_name
    # Loading with EvalScope's models changes no number: the file is a fixed point.
    for es_metric, raw_metric in zip(es.metrics, raw["metrics"], strict=True):
        assert set(raw_metric) == V1_METRIC_KEYS
        assert (es_metric.num, es_metric.score, es_metric.macro_score) == (
            raw_metric["num"], raw_metric["score"], raw_metric["macro_score"])
        for es_cat, raw_cat in zip(es_metric.categories, raw_metric["categories"], strict=True):
            assert (es_cat.num, es_cat.score, es_cat.macro_score) == (
                raw_cat["num"], raw_cat["score"], raw_cat["macro_score"])
            assert list(es_cat.name) == raw_cat["name"] == ["default"]
    assert es.score == raw["score"]
    # The numbers are ours: each subset's score rounded to 4 decimals, EvalScope's names.
    names = {report_metric_name(r.metric): r.metric for r in ours.metrics}
    assert es.metrics[0].name == report_metric_name(ours.primary_metric)
    assert raw["score"] == es.metrics[0].score
    assert {m.name for m in es.metrics} == {report_metric_name(r.metric) for r in ours.metrics
                                            if r.score is not None}
    for metric in es.metrics:
        subsets = [s for c in metric.categories for s in c.subsets]
        assert [s.name for s in subsets] == ours.subsets
        for s in subsets:
            row = next(r for r in ours.metrics if r.metric == names[metric.name]
                       and r.subset == s.name and r.category is None)
            assert (s.num, s.score) == (row.num, round(row.score, 4))
        overall = ours.row(names[metric.name], OVERALL if len(ours.subsets) > 1 else None)
        assert metric.num == overall.num
        assert math.isclose(metric.score, overall.score, abs_tol=1e-4)
    assert raw["num"] == sum(s.num for c in es.metrics[0].categories for s in c.subsets)
    summary = ours.summary
    assert raw["execution_summary"] == {
        "requested": summary.requested, "succeeded": summary.succeeded,
        "errored": summary.errored, "skipped": summary.skipped, "subsets": {},
        "incomplete": summary.succeeded < summary.requested or summary.skipped > 0}
    # EvalScope's newer reader (schema 2) accepts the file: no key it does not know.
    assert set(raw) <= HEAD_REPORT_KEYS | HEAD_MIGRATED_AWAY
    assert is_report_json(raw)


def test_metric_names_are_evalscopes(run) -> None:
    run_dir, _ = run
    assert [m["name"] for m in _load(run_dir, "general_vqa")["metrics"]] == [
        "mean_Rouge-L-R", *(f"mean_bleu-{n}" for n in range(1, 5)),
        *(f"mean_Rouge-{v}-{s}" for v in "12L" for s in "RPF" if (v, s) != ("L", "R"))]
    assert [m["name"] for m in _load(run_dir, "general_vmcq")["metrics"]] == ["mean_acc"]


def test_category_rows_stay_in_groundscopes_report(run) -> None:
    """legacy_mcq's per-record categories have no place in EvalScope's schema (its categories
    group whole subsets): they are in the .groundscope.json report only."""
    run_dir, report = run
    assert any(r.category for r in report["legacy_mcq"].metrics)
    raw = _load(run_dir, "legacy_mcq")
    assert [s["name"] for m in raw["metrics"] for c in m["categories"] for s in c["subsets"]] == [
        "custom_mcq"]


def test_groundscopes_report_is_beside_it_and_not_read_as_evalscopes(run) -> None:
    run_dir, report = run
    folder = run_dir / "reports" / MODEL_ID
    assert sorted(p.name for p in folder.iterdir()) == sorted(
        f"{d}{suffix}" for d in report for suffix in (".json", ".groundscope.json"))
    for name in report:
        data = json.loads((folder / f"{name}.groundscope.json").read_text())
        assert DatasetReport.model_validate(data) == report[name]
        assert not is_report_json(data)  # EvalScope's own tools skip it


def test_task_config_yaml_is_the_resolved_config_with_secrets_hidden(run) -> None:
    run_dir, _ = run
    text = (run_dir / "configs" / "task_config.yaml").read_text()
    assert SECRET not in text
    data = yaml.safe_load(text)
    saved = json.loads((run_dir / "config.json").read_text())
    assert data["api_key"] == saved["api_key"] == "***"
    assert data["model"] == MODEL and data["model_id"] == MODEL_ID
    assert data["datasets"] == ["general_vqa", "general_vmcq", "legacy_mcq"]
    assert data["dataset_args"] == saved["dataset_args"]
    assert list(data) == sorted(data)  # as EvalScope dumps it (PyYAML's sorted keys)
    assert data == {**{k: v for k, v in saved.items() if k not in ("schema_version", "format")},
                    "model_id": MODEL_ID}
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_an_unscored_dataset_has_no_score_rather_than_zero(tmp_path: Path) -> None:
    """Every request failed (--ignore-errors): EvalScope's newer reports say so with
    ``metrics: []`` and no score; a 0 would read as a model that got everything wrong."""
    from groundscope.report.evalscope import evalscope_report
    from groundscope.summary import Summary

    rep = DatasetReport(model="m", dataset="general_vqa", pretty_name="General-VQA",
                        primary_metric="rouge-l-r", subsets=["s"],
                        summary=Summary(requested=3, errored=3), metrics=[])
    data = evalscope_report(rep)
    assert "score" not in data and data["metrics"] == [] and data["num"] == 0
    assert data["execution_summary"]["incomplete"] is True
    assert is_report_json(data)


def _small_run(work: Path, model: str, *extra: str) -> Path:
    args = {"general_vqa": {"local_path": str(EXAMPLES / "vqa"), "subset_list": ["example_openai"]}}
    proc = run_cli("eval", "--eval-type", "mock", "--model", model, "--datasets", "general_vqa",
                   "--dataset-args", json.dumps(args), "--work-dir", str(work), "--no-timestamp",
                   "--no-progress", *extra, cwd=work.parent)
    assert proc.returncode == 0, proc.stderr
    return work


@pytest.mark.slow
def test_a_run_directory_of_schema_1_is_still_read(tmp_path: Path) -> None:
    """Before EvalScope's file took ``<dataset>.json``, groundscope's report was there: the
    HTML page, comparisons and ``groundscope report`` still read such a run."""
    run_dir = _small_run(tmp_path / "run", "m")
    folder = run_dir / "reports" / "m"
    (folder / "general_vqa.groundscope.json").replace(folder / "general_vqa.json")
    config = json.loads((run_dir / "config.json").read_text())
    (run_dir / "config.json").write_text(json.dumps({**config, "schema_version": 1}))
    shutil.rmtree(run_dir / "configs")
    data = load_run(run_dir)
    assert [r.dataset for r in data.reports] == ["general_vqa"]
    n = data.reports[0].summary.succeeded
    assert n > 0 and compare_runs([run_dir, run_dir]).matched == {"general_vqa": n}
    proc = run_cli("report", str(run_dir), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "did not finish" not in proc.stderr and "report.html" not in proc.stderr
    assert (folder / "general_vqa.groundscope.json").exists()
    assert is_report_json(json.loads((folder / "general_vqa.json").read_text()))
    # the page, and report again, read the rebuilt run (its config still says schema 1)
    assert load_run(run_dir).reports[0].summary.succeeded == n
    assert run_cli("report", str(run_dir), cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_resuming_a_run_whose_model_folder_has_the_whole_model_name(tmp_path: Path) -> None:
    """Runs written before ``model_id`` defaulted to the model's last path part keep their
    outputs under the whole name (``org/m`` -> ``org_m``): a resume reuses them."""
    run_dir = _small_run(tmp_path / "run", "org/m")
    for kind in ("predictions", "reviews", "reports"):
        (run_dir / kind / "m").rename(run_dir / kind / "org_m")
    _small_run(run_dir, "org/m", "--use-cache", str(run_dir))
    summary = json.loads((run_dir / "reports" / "org_m" / "general_vqa.groundscope.json")
                         .read_text())["summary"]
    assert summary["cached"] == summary["requested"] > 0
    assert not (run_dir / "predictions" / "m").exists()
