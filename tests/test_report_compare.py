"""Run comparison (``groundscope report RUN_A RUN_B``): deltas, paired test, disagreements.

Two run directories are written by hand with known per-sample scores; every expected number
is recomputed here independently (the p-values by brute-force enumeration of sign flips).
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from xml.etree import ElementTree

import pytest

from groundscope.cli import main
from groundscope.report import plots
from groundscope.report.compare import compare_runs, paired_permutation_test, render_comparison
from groundscope.report.compare_html import write_comparison
from groundscope.report.evalscope import evalscope_report
from groundscope.report.model import DatasetReport, MetricRow, Summary
from groundscope.store import RunStore
from groundscope.types import (
    Completion,
    Message,
    Origin,
    Prediction,
    PredictionStatus,
    Sample,
    Score,
    ScoreStatus,
)

# per-sample (rouge-l-r, exact_match); None = the request errored
RUN_A = {
    "s1": {f"a{i}": (r, 0.0) for i, r in enumerate([1, 1, .8, .6, .4, .2, 0, 0, .3, .7])},
    "s2": {"b0": (.5, 1.0), "b1": (.5, 1.0), "b2": (1.0, 1.0), "b3": (0.0, 0.0), "b4": (1.0, 1.0)},
}
RUN_B = {
    "s1": {f"a{i}": (r, 1.0) for i, r in enumerate([1, .9, .8, .6, .6, .9, .1, 0, .3, .2])},
    "s2": {"b0": None, "b1": (.4, 1.0), "b2": (1.0, 1.0), "b3": (0.0, 0.0)},
}


def make_run(path: Path, model: str, data: dict) -> Path:
    path.mkdir(parents=True)
    store = RunStore(path, model)
    store.write_config({"model": model, "datasets": ["general_vqa"], "eval_type": "mock"})
    for subset, samples in data.items():
        for sid, values in samples.items():
            sample = Sample(id=sid, dataset="general_vqa", subset=subset,
                            messages=(Message("user", f"question {sid}"),),
                            origin=Origin(path / "data.jsonl", 1), target=(f"ref {sid}",),
                            question=f"question {sid}")
            if values is None:
                pred = Prediction(sid, "h", PredictionStatus.ERROR, error="boom", error_kind="http_500")
                score = Score(sid, "rouge", ScoreStatus.ERROR)
            else:
                pred = Prediction(sid, "h", PredictionStatus.OK, completion=Completion(f"answer {sid}"))
                score = Score(sid, "rouge", ScoreStatus.OK,
                              values={"rouge-l-r": values[0], "exact_match": values[1]})
            store.append_prediction("general_vqa", subset, sample, pred)
            store.append_score("general_vqa", subset, score, "h")
    store.close()
    rows = [MetricRow(metric=m, subset=s, num=0, score=None)
            for m in ("rouge-l-r", "exact_match") for s in [*data, "OVERALL"]]
    rep = DatasetReport(model=model, dataset="general_vqa", pretty_name="General-VQA",
                        primary_metric="rouge-l-r", subsets=list(data), summary=Summary(),
                        metrics=rows)
    store.write_report("general_vqa", rep.model_dump(mode="json"), evalscope_report(rep))
    return path


def exact_p(a: list[float], b: list[float]) -> float:
    """Brute force: the share of all 2^n sign patterns at least as extreme as observed."""
    d = [y - x for x, y in zip(a, b, strict=True)]
    observed = abs(sum(d))
    patterns = list(itertools.product((1, -1), repeat=len(d)))
    return sum(abs(sum(s * x for s, x in zip(p, d, strict=True))) >= observed - 1e-9
               for p in patterns) / len(patterns)


def mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("cmp")
    return make_run(root / "a", "model-a", RUN_A), make_run(root / "b", "model-b", RUN_B)


def values(run: dict, subset: str, k: int) -> dict[str, float]:
    return {sid: v[k] for sid, v in run[subset].items() if v is not None}


def test_scores_deltas_and_p_values(runs: tuple[Path, Path]) -> None:
    cmp = compare_runs(runs)
    rows = {(r.subset, r.metric): r for r in cmp.rows}
    assert set(rows) == {(s, m) for s in ("s1", "s2", "OVERALL") for m in ("rouge-l-r", "exact_match")}
    for (subset, metric), row in rows.items():
        k = 0 if metric == "rouge-l-r" else 1
        scope = ["s1", "s2"] if subset == "OVERALL" else [subset]
        a = {(s, sid): v for s in scope for sid, v in values(RUN_A, s, k).items()}
        b = {(s, sid): v for s in scope for sid, v in values(RUN_B, s, k).items()}
        assert row.scores == pytest.approx([mean(list(a.values())), mean(list(b.values()))])
        assert row.nums == [len(a), len(b)]
        assert row.deltas[1] == pytest.approx(mean(list(b.values())) - mean(list(a.values())))
        both = sorted(set(a) & set(b))
        assert row.paired[1] == len(both)
        expected = exact_p([a[key] for key in both], [b[key] for key in both])
        assert row.p_values[1] == pytest.approx(expected), (subset, metric)
    # spot checks against hand arithmetic
    assert rows[("s2", "rouge-l-r")].scores == pytest.approx([0.6, 1.4 / 3])
    assert rows[("s1", "exact_match")].p_values[1] == pytest.approx(2 / 1024)  # 10 of 10 flipped up
    assert rows[("s2", "exact_match")].p_values[1] == 1.0  # no paired difference at all


def test_disagreements(runs: tuple[Path, Path]) -> None:
    cmp = compare_runs(runs)
    found = {(d.subset, d.sample_id): d.outcomes for d in cmp.disagreements}
    # pass = rouge-l-r >= 0.5; b0 errored in B and b4 is missing there: not disagreements
    assert found == {("s1", "a4"): ["fail", "pass"], ("s1", "a5"): ["fail", "pass"],
                     ("s1", "a9"): ["pass", "fail"], ("s2", "b1"): ["pass", "fail"]}
    assert cmp.matched == {"general_vqa": 14}
    a9 = next(d for d in cmp.disagreements if d.sample_id == "a9")
    assert [t["prediction"] for t in a9.texts] == ["answer a9", "answer a9"]
    assert a9.values == pytest.approx([0.7, 0.2])


def test_text_and_page(runs: tuple[Path, Path], tmp_path: Path) -> None:
    cmp = compare_runs(runs)
    text = render_comparison(cmp)
    assert "[1] model-a" in text and "[2] model-b" in text
    line = next(x for x in text.splitlines() if "ROUGE ↑ · L · Recall" in x and "| s2 " in x)
    assert "60%" in line and "46.7%" in line and "-13.3 pp" in line
    assert "4 of 14 samples" in text
    assert "general_vqa / s1 / a9: [1] pass  [2] fail" in text
    page = write_comparison(cmp, tmp_path / "out" / "cmp.html").read_text()
    assert page.count('class="gs-badge gs-badge-pass"') == 4
    assert "Content-Security-Policy" in page and "<script>" not in page


def test_cli_several_runs(runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    out = tmp_path / "c.html"
    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "Δ [2]" in printed and f"Comparison page: {out}" in printed
    assert out.stat().st_size > 1000
    assert not (runs[0] / "report.html").exists()  # comparing never rewrites a run


def test_cli_one_run_rebuilds_the_page(runs: tuple[Path, Path], tmp_path: Path,
                                       capsys: pytest.CaptureFixture) -> None:
    run = shutil.copytree(runs[1], tmp_path / "run")
    assert main(["report", str(run)]) == 0
    printed = capsys.readouterr().out
    assert "ROUGE ↑ · L · Recall" in printed and f"HTML report: {run / 'report.html'}" in printed
    page = (run / "report.html").read_text()
    assert "errored (1)" in page and "http_500" in page


def test_permutation_test_monte_carlo() -> None:
    ones = [1.0] * 40
    assert paired_permutation_test([0.0] * 40, ones) == pytest.approx(1 / 10_001)
    assert paired_permutation_test([0.0, 1.0] * 20, [1.0, 0.0] * 20) == 1.0
    a = [0.1 * (i % 7) for i in range(14)]
    b = [x + (0.05 if i % 3 else -0.04) for i, x in enumerate(a)]
    estimate = paired_permutation_test(a, b, seed=1)
    assert estimate == paired_permutation_test(a, b, seed=1)  # seeded
    assert estimate == pytest.approx(exact_p(a, b), abs=0.02)  # 2^14 > 10,000: sampled


def test_charts_are_well_formed_svg() -> None:
    bars = [plots.Bar("a&b <subset>", 0.25, 0.1, 0.4, 8), plots.Bar("none", None),
            plots.Bar("OVERALL", 1.0, 0.9, 1.0, 9, emphasis=True)]
    for svg in (plots.bar_chart("Accuracy ↑", bars),
                plots.histogram("Latency", [0.1, 0.2, 0.2, 3.0], lo=0, hi=3, bins=6, fmt=str),
                plots.histogram("Empty", [], lo=0, hi=1, bins=10, fmt=str)):
        root = ElementTree.fromstring(svg)
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
    widths = [float(r.get("width")) for r in ElementTree.fromstring(plots.bar_chart("x", bars))
              .iter("{http://www.w3.org/2000/svg}rect")]
    assert len(widths) == 2 and widths[1] == pytest.approx(4 * widths[0])  # 100% vs 25%


def test_help_does_not_import_reporting() -> None:
    code = ("import sys, groundscope\nfrom groundscope.cli import build_parser\n"
            "build_parser().format_help()\n"
            "bad = [m for m in ('groundscope.report.html', 'groundscope.report.plots', "
            "'groundscope.report.compare', 'PIL') if m in sys.modules]\nprint(bad)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def make_long_run(path: Path, model: str, n: int, chars: int, *, long: str | None = None,
                  detail: object = None) -> Path:
    """A run of ``n`` samples whose question, reference, answer, reasoning and judge detail
    are ``chars`` characters each (an endpoint may answer up to the 4 MiB reply cap), or
    ``long``; ``detail``: the judge detail instead."""
    path.mkdir(parents=True)
    store = RunStore(path, model)
    store.write_config({"model": model, "datasets": ["general_vqa"], "eval_type": "mock"})
    long = "word " * (chars // 5) if long is None else long
    for k in range(n):
        sid = f"s{k}"
        sample = Sample(id=sid, dataset="general_vqa", subset="default",
                        messages=(Message("user", f"{k} {long}"),), origin=Origin(path / "d.jsonl", 1),
                        target=(f"{k} {long}",), question=f"{k} {long}")
        pred = Prediction(sid, "h", PredictionStatus.OK,
                          completion=Completion(f"{k} {long}", reasoning=f"{k} {long}"))
        store.append_prediction("general_vqa", "default", sample, pred)
        store.append_score("general_vqa", "default",
                           Score(sid, "judge", ScoreStatus.OK, values={"accuracy": 1.0},
                                 detail={"reply": f"{k} {long}"} if detail is None else detail),
                           "h")
    store.close()
    rep = DatasetReport(model=model, dataset="general_vqa", pretty_name="General-VQA",
                        primary_metric="accuracy", subsets=["default"], summary=Summary(),
                        metrics=[MetricRow(metric="accuracy", subset=s, num=n, score=1.0)
                                 for s in ("default", "OVERALL")])
    store.write_report("general_vqa", rep.model_dump(mode="json"), evalscope_report(rep))
    return path


def _peak_bytes(work: Callable[[], object]) -> int:
    import gc
    import tracemalloc

    gc.collect()
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_page_and_a_comparison_hold_long_texts_cut_as_they_read(tmp_path: Path) -> None:
    """The page shows 20,000 characters of a text and a comparison 400, but both held every
    row they read whole first: the page up to 1,000 samples' rows, a comparison every
    sample's question, references and answer, for each run (a run of 4 MiB answers: GBs).
    They now cut each text as its row is read: memory is bounded by what is shown."""
    from groundscope.report.html import write_html

    a = make_long_run(tmp_path / "a", "m", 30, 400_000)
    b = make_long_run(tmp_path / "b", "m", 30, 400_000)  # 60 MB of text each, read back
    page = _peak_bytes(lambda: write_html(a))
    compared = _peak_bytes(lambda: compare_runs([a, b]))
    html = (a / "report.html").read_text()
    assert "... [380002 more characters not shown]" in html  # "9 " + 400,000: counted whole
    # (reading a row parses it whole: orjson's peak is ~13x the line, 2 MB here)
    assert page < 48 << 20, page  # 82 MB before; 30 samples x 6 texts of 20,000 characters shown
    assert compared < 48 << 20, compared  # 116 MB before


def test_a_text_made_to_look_cut_is_cut_again(tmp_path: Path) -> None:
    """A text is cut where it is read, whatever it holds: one crafted to end like a cut note
    was taken as cut already and shown whole (a 5 MB answer in the page)."""
    from groundscope.report.html import write_html

    fake = "A" * 19_998 + " ... [" + "X" * 1_000_000 + " more characters not shown]"  # "k " first
    a = make_long_run(tmp_path / "a", "m", 2, 0, long=fake)
    html = (write_html(a)).read_text()
    assert "X" * 1_000 not in html and len(html) < 1_000_000
    assert f"... [{len('0 ' + fake) - 20_000} more characters not shown]" in html  # counted whole


def test_deeply_nested_judge_detail_is_shown_to_a_depth(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """orjson reads JSON nested 1,024 deep; cutting texts went down every level and a detail
    500 deep stopped report A B with a RecursionError traceback. Past CUT_DEPTH levels a
    detail is a note; both pages are written."""
    a = make_long_run(tmp_path / "a", "m", 2, 100, detail={"deep": "DEEP"})
    b = make_long_run(tmp_path / "b", "m", 2, 100)
    reviews = next((a / "reviews").rglob("*.jsonl"))  # deeper than groundscope writes: by hand
    reviews.write_text(reviews.read_text().replace('"DEEP"', "[" * 900 + '"x"' + "]" * 900))
    assert main(["report", str(a), str(b), "--out", str(tmp_path / "c.html")]) == 0
    assert (tmp_path / "c.html").exists()
    assert main(["report", str(a)]) == 0
    assert "nested deeper than 32 levels: not shown" in (a / "report.html").read_text()
