"""``run_task``'s return value is what EvalScope's is, a mapping from dataset name to that
dataset's report (``result["general_vmcq"]``), and keeps groundscope's richer methods
(issue 13, item 7)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from groundscope import DatasetReport, Report
from groundscope.report.model import MetricRow, Summary


def _rep(dataset: str, score: float) -> DatasetReport:
    return DatasetReport(model="m", dataset=dataset, pretty_name=dataset.upper(),
                         primary_metric="accuracy", subsets=["s"], summary=Summary(),
                         metrics=[MetricRow(metric="accuracy", subset="s", num=4, score=score)])


def test_report_is_a_mapping_of_dataset_reports() -> None:
    vqa, vmcq = _rep("general_vqa", 0.25), _rep("general_vmcq", 0.75)
    report = Report(run_dir="outputs/x", model="m", datasets=[vqa, vmcq])
    assert isinstance(report, Mapping)
    assert report["general_vmcq"] is vmcq and report["general_vqa"] is vqa
    assert list(report) == ["general_vqa", "general_vmcq"] and len(report) == 2
    assert "general_vqa" in report and "legacy_mcq" not in report
    assert report.get("legacy_mcq") is None
    assert dict(report) == {"general_vqa": vqa, "general_vmcq": vmcq}
    assert [rep.score() for rep in report.values()] == [0.25, 0.75]
    with pytest.raises(KeyError, match="'legacy_mcq' is not a dataset of this run"):
        report["legacy_mcq"]


def test_report_keeps_its_richer_api() -> None:
    vqa = _rep("general_vqa", 0.25)
    report = Report(run_dir="outputs/x", model="m", datasets=[vqa])
    assert report.dataset("general_vqa") is vqa and report.datasets == [vqa]
    assert report.run_dir == "outputs/x" and report.model == "m"
    assert str(report) == report.table() and "25%" in report.table()
    assert repr(report) == "Report(run_dir='outputs/x', model='m', datasets=['general_vqa'])"
