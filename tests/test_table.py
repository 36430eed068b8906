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
    assert format_score(-0.00004) == "0%"
    assert format_score(-0.05) == "-5%"


def test_percent_rounds_as_evalscope() -> None:
    """EvalScope's table shows the score its report stores (rounded to 4 decimals), as a
    percentage rounded half-up (decimal ties toward +inf): 0.3125 -> 31.3%, and 0.11249 is
    stored as 0.1125 -> 11.3%."""
    assert format_score(0.3125) == "31.3%"
    assert format_score(0.11249) == "11.3%"
    assert format_score(0.0005) == "0.1%"
    assert format_score(0.99949) == "100%"


def test_table_is_evalscopes_simple_grid() -> None:
    """EvalScope prints ``tabulate(..., tablefmt="simple_grid")`` with tabulate's default
    alignment (evalscope/report/combinator.py, gen_table): box-drawing lines, Num right,
    the formatted Score left; headers Model, Dataset, Metric, Subset, Num, Score."""
    rep = DatasetReport(model="qwen-vl-plus", dataset="general_vqa", pretty_name="General-VQA",
                        primary_metric="rouge-l-r", subsets=["example_openai"], summary=Summary(),
                        metrics=[MetricRow(metric="bleu-1", subset="example_openai", num=5,
                                           score=0.007)])
    assert render_table([rep]).splitlines() == [
        "┌──────────────┬─────────────┬────────────┬────────────────┬───────┬─────────┐",
        "│ Model        │ Dataset     │ Metric     │ Subset         │   Num │ Score   │",
        "├──────────────┼─────────────┼────────────┼────────────────┼───────┼─────────┤",
        "│ qwen-vl-plus │ General-VQA │ BLEU ↑ · 1 │ example_openai │     5 │ 0.7%    │",
        "└──────────────┴─────────────┴────────────┴────────────────┴───────┴─────────┘",
    ]
