"""The terminal table looks like EvalScope's."""

from groundscope.report.model import DatasetReport, MetricRow, Summary
from groundscope.report.table import format_score, metric_label, render_table


def test_labels() -> None:
    assert metric_label("bleu-3") == "BLEU ↑ · 3"
    assert metric_label("rouge-1-p") == "ROUGE ↑ · 1 · Precision"
    assert metric_label("rouge-2-f") == "ROUGE ↑ · 2 · F1"
    assert metric_label("rouge-l-r") == "ROUGE ↑ · L · Recall"
    assert metric_label("accuracy") == "Accuracy ↑"


def test_percent_format() -> None:
    assert format_score(1.0) == "100%"
    assert format_score(0.24) == "24%"
    assert format_score(0.313) == "31.3%"
    assert format_score(0.0) == "0%"
    assert format_score(2.2e-308) == "0%"


def test_table_columns_and_rows() -> None:
    rep = DatasetReport(model="qwen-vl-plus", dataset="general_vqa", pretty_name="General-VQA",
                        primary_metric="rouge-l-r", subsets=["example_openai"], summary=Summary(),
                        metrics=[MetricRow(metric="bleu-1", subset="example_openai", num=5,
                                           score=0.007)])
    text = render_table([rep])
    header = text.splitlines()[1]
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Model", "Dataset", "Metric", "Subset", "Num", "Score"]
    assert "| qwen-vl-plus | General-VQA | BLEU ↑ · 1 | example_openai |     5 |    0.7% |" in text
