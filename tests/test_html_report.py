"""``report.html`` in a real browser: headless Chromium (Debian's) driven by Playwright.

A simulator run over copies of the bundled examples, plus a subset with a broken image
(errored), a record without a reference (excluded) and a record whose saved answer is then
replaced by hostile HTML. One medium is deleted after the run (its path must show, the page
must not break) and one review gains grounding-style per-claim detail. The page must load
offline with no console error and no request but itself, and its filters must work.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from groundscope.config import load_config
from groundscope.errors import RecordError
from groundscope.jsonl import read_jsonl
from groundscope.report.compare import compare_runs
from groundscope.report.compare_html import write_comparison
from groundscope.report.html import write_html
from groundscope.run import run_task
from groundscope.runner import iter_samples, plan_dataset
from groundscope.simulator import SimBehaviour, SimulatorServer

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync"]
HOSTILE = '</script><script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'
CLAIMS = {"claims": [{"claim": "A dog stands on grass.", "verdict": "supported", "reason": "visible"},
                     {"claim": "The dog is blue.", "verdict": "contradicted", "reason": "it is brown"}],
          "reasoning": "two checkable claims"}


def _write_jsonl(path: Path, records: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def make_dataset(root: Path) -> Path:
    shutil.copytree(ROOT / "examples" / "media", root / "media")
    (root / "vqa").mkdir()
    for name in ("example_openai.jsonl", "example_placeholder.jsonl"):
        shutil.copy(ROOT / "examples" / "vqa" / name, root / "vqa" / name)
    shutil.copytree(ROOT / "examples" / "mcq", root / "mcq")
    (root / "media" / "garbage.jpg").write_bytes(b"this is not an image at all")
    image = [{"type": "text", "text": "What is this?"},
             {"type": "image_url", "image_url": {"url": "../media/garbage.jpg"}}]
    _write_jsonl(root / "vqa" / "broken.jsonl", [
        {"id": "garbage", "messages": [{"role": "user", "content": image}], "answer": "Nothing"},
        {"id": "too-long", "messages": [{"role": "user", "content": "word " * 40_000}], "answer": "x"},
        {"id": "hostile", "messages": [{"role": "user", "content": "Say hi"}], "answer": "hi"},
        {"id": "no-ref", "messages": [{"role": "user", "content": "Anything to add?"}]},
    ])
    return root


def _rewrite(path: Path, change: Any) -> None:
    rows = [change(row) for row in read_jsonl(path)]
    _write_jsonl(path, rows)


def tamper(run_dir: Path, data: Path) -> None:
    """After the run: hostile answer text, per-claim detail, a deleted medium."""
    model_dir = next((run_dir / "predictions").iterdir()).name

    def hostile(row: dict[str, Any]) -> dict[str, Any]:
        return {**row, "prediction": HOSTILE} if row["sample_id"] == "hostile" else row

    def claims(row: dict[str, Any]) -> dict[str, Any]:
        hit = row["sample_id"] == "example_openai:1" and row["scorer"] == "rouge"
        # a passing score with a contradicted claim: a hallucination, never badged "pass"
        values = {**row["values"], "rouge-l-r": 1.0}
        return {**row, "detail": CLAIMS, "values": values} if hit else row

    def judge_failed(row: dict[str, Any]) -> dict[str, Any]:
        hit = row["sample_id"] == "example_placeholder:2" and row["scorer"] == "rouge"
        return {**row, "status": "judge_failed", "values": {}} if hit else row

    _rewrite(run_dir / "predictions" / model_dir / "general_vqa_broken.jsonl", hostile)
    _rewrite(run_dir / "reviews" / model_dir / "general_vqa_example_openai.jsonl", claims)
    _rewrite(run_dir / "reviews" / model_dir / "general_vqa_example_placeholder.jsonl", judge_failed)
    (data / "media" / "tesla.jpg").unlink()


def run_config(data: Path, work: Path, api_url: str = "http://127.0.0.1:9/v1") -> dict[str, Any]:
    return {
        "eval_type": "openai_api", "api_url": api_url, "model": "sim-vl",
        "datasets": ["general_vqa", "general_vmcq"],
        "dataset_args": {
            "general_vqa": {"local_path": str(data / "vqa"),
                            "subset_list": ["example_openai", "example_placeholder", "broken"]},
            "general_vmcq": {"local_path": str(data / "mcq"), "subset_list": ["example"]}},
        "ignore_errors": True, "work_dir": str(work), "no_timestamp": True, "max_retries": 0,
        "media_roots": [str(data / "media")],  # the datasets' ../media, outside the cwd
    }


def simulated_run(data: Path, work: Path, accuracy: float) -> Path:
    """A run against the simulator; prompts over 20k tokens fail with a 400 (context length)."""
    cfg = load_config(run_config(data, work))
    samples = [s for name in cfg.datasets for _, s in iter_samples(cfg, plan_dataset(cfg, name),
                                                                  strict=False)
               if not isinstance(s, RecordError)]
    behaviour = SimBehaviour(accuracy=accuracy, seed=3, max_context_tokens=20_000)
    with SimulatorServer(samples, behaviour) as url:
        return Path(run_task(run_config(data, work, url)).run_dir)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("html")
    data = make_dataset(root / "data")
    run_dir = simulated_run(data, root / "run_a", accuracy=0.5)
    second = simulated_run(data, root / "run_b", accuracy=1.0)
    assert (run_dir / "report.html").exists()  # written by the runner itself
    tamper(run_dir, data)
    write_html(run_dir)
    return run_dir, second


def saved_predictions(run_dir: Path) -> list[dict[str, Any]]:
    return [row for path in sorted((run_dir / "predictions").glob("*/*.jsonl"))
            for row in read_jsonl(path)]


@pytest.fixture(scope="module")
def browser(runs: tuple[Path, Path]):  # after the runs: asyncio.run cannot nest in Playwright's loop
    if not CHROMIUM.exists():
        pytest.skip("headless browser test: /usr/bin/chromium is not installed "
                    "(apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        chromium = pw.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield chromium
        chromium.close()


def _expect(target: Any) -> Any:
    """Playwright's ``expect`` (its assertions poll from the test's side, not by a script
    in the page); imported here, as the browser is, so the module loads without it."""
    from playwright.sync_api import expect

    return expect(target)


class Page:
    """A page that records console errors, page errors and every request it makes."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page(viewport={"width": 1280, "height": 900})
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.url = path.resolve().as_uri()
        self.page.goto(self.url)
        self.page.wait_for_selector("#gs-count[data-count]" if "report" in path.name else "main")

    def offline(self) -> list[str]:
        """Requests other than the file itself (data: URIs are not fetches)."""
        return [u for u in self.requests if u != self.url and not u.startswith("data:")]

    def search(self, text: str) -> int:
        """Type a search and wait until the (debounced) list shows it; the match count."""
        self.page.fill("#gs-search", text)
        query = " ".join(text.lower().split())
        self.page.wait_for_selector(f'#gs-count[data-query="{query}"]', state="attached")
        return self.count()

    def open_row(self, n: int = 1) -> None:
        """Click the n-th row open and wait for its details (built on the toggle event)."""
        self.page.click(f"#gs-list > details:nth-child({n}) > summary")
        self.page.wait_for_selector(f"#gs-list > details:nth-child({n}) > .gs-body")

    def count(self) -> int:
        return int(self.page.get_attribute("#gs-count", "data-count") or -1)

    def rows(self) -> int:
        return self.page.locator("#gs-list > details.gs-sample").count()


@pytest.fixture
def report_page(browser: Any, runs: tuple[Path, Path]):
    page = Page(browser, runs[0] / "report.html")
    yield page
    page.page.close()


def test_loads_offline_without_errors(report_page: Page, runs: tuple[Path, Path]) -> None:
    page = report_page
    assert page.rows() == page.count() == len(saved_predictions(runs[0]))
    page.open_row()  # its images render from data URIs
    page.page.wait_for_selector("#gs-list img")
    # decoding may lag under load: wait on each image's property from the test's side (a
    # wait_for_function string is evaluated in the page, which the page's CSP refuses)
    images = page.page.locator("img")
    for i in range(images.count()):
        _expect(images.nth(i)).to_have_js_property("complete", True, timeout=15_000)
    assert page.page.evaluate("[...document.images].every(i => i.naturalWidth > 0)")
    assert page.errors == []
    assert page.offline() == []


def test_metrics_table_and_charts(report_page: Page, runs: tuple[Path, Path]) -> None:
    p = report_page.page
    reports = [json.loads(f.read_text()) for f in sorted((runs[0] / "reports").glob("*/*.groundscope.json"))]
    n_rows = sum(len(r["metrics"]) for r in reports)
    assert p.locator("table.gs-metrics tbody tr").count() == n_rows
    headers = p.locator("table.gs-metrics th").all_inner_texts()
    assert headers == ["Model", "Dataset", "Metric", "Subset", "Num", "Score", "95% CI low",
                       "95% CI high", "Excluded"]
    assert p.locator("table.gs-metrics td", has_text="ROUGE ↑ · L · Recall").count() >= 4
    # the 13 BLEU / ROUGE metrics in one chart; the primary (ROUGE-L recall) and accuracy by
    # subset and as a distribution each; a latency chart per dataset
    family = p.locator("#plots svg[aria-label='BLEU / ROUGE, all subsets']")
    assert family.count() == 1 and family.locator("rect.gs-bar").count() == 13
    assert p.locator("#plots svg[aria-label='BLEU ↑ · 1']").count() == 0
    assert p.locator("#plots svg[aria-label='ROUGE ↑ · L · Recall']").count() == 2
    assert p.locator("#plots svg.gs-chart").count() == 1 + 2 + 2 + len(reports)
    assert p.locator("#plots svg.gs-chart path.gs-err").count() > 0  # CI error bars
    assert p.locator("#plots svg[aria-label^='Latency']").count() == len(reports)
    assert report_page.errors == []


def test_the_page_says_how_its_intervals_are_made(runs: tuple[Path, Path]) -> None:
    """Large runs use the normal approximation, not the bootstrap: the note says both."""
    from groundscope.metrics import BOOTSTRAP_MAX_N

    text = (runs[0] / "report.html").read_text()
    assert "CIs are 95% intervals of the mean" in text
    assert f"a percentile bootstrap of 1,000 resamples up to {BOOTSTRAP_MAX_N:,} samples" in text
    assert "the normal approximation (mean ± 1.96 standard errors) above" in text
    assert "bootstrap intervals of the mean" not in text


def test_filters_and_search(report_page: Page, runs: tuple[Path, Path]) -> None:
    page, p = report_page, report_page.page
    preds = saved_predictions(runs[0])
    errored = [r for r in preds if r["status"] != "ok"]
    assert [(r["sample_id"], r["error_kind"]) for r in errored] == [("too-long", "context_length")]
    p.select_option("#gs-outcome", "errored")
    assert page.count() == page.rows() == 1
    assert "context_length" in p.inner_text("#gs-list")
    p.select_option("#gs-outcome", "excluded")
    assert page.count() == 2 and "no-ref" in p.inner_text("#gs-list")  # and the judge_failed one
    assert "example_placeholder:2" in p.inner_text("#gs-list")
    p.select_option("#gs-outcome", "")
    p.select_option("#gs-subset", label="example_placeholder")
    expected = sum(1 for r in preds if r["subset"] == "example_placeholder")
    assert page.count() == page.rows() == expected
    p.select_option("#gs-subset", "")
    assert page.search("skyline") == 1  # only the Tokyo question says it
    assert page.rows() == 1
    assert page.search("no such text anywhere") == 0
    assert page.rows() == 0
    labels = p.locator("#gs-outcome option").all_inner_texts()
    assert labels[0] == f"all ({len(preds)})" and "errored (1)" in labels and "excluded (2)" in labels
    assert page.errors == []


def test_drill_down_detail_missing_media_and_hostile_text(report_page: Page) -> None:
    page, p = report_page, report_page.page
    assert page.search("example_openai:1") == 1
    page.open_row()
    detail = p.locator("#gs-list .gs-detail table")
    assert detail.locator("td", has_text="The dog is blue.").count() == 1
    assert detail.locator(".gs-v-bad", has_text="contradicted").count() == 1
    assert detail.locator(".gs-v-good", has_text="supported").count() == 1
    assert page.search("brand of this car") == 1  # its image, tesla.jpg, was deleted
    page.open_row()
    media = p.inner_text("#gs-list .gs-media")
    assert "../media/tesla.jpg" in media and "file not found" in media
    assert page.search("example_openai:6") == 1  # a 16 KB WAV: embedded as a player
    page.open_row()
    assert p.get_attribute("#gs-list audio", "src").startswith("data:audio/wav;base64,")
    assert page.search("example_openai:9") == 1  # video: its first frame, and its path
    page.open_row()
    assert "[video] ../media/sample.mp4" in p.inner_text("#gs-list .gs-media")
    thumb = p.locator("#gs-list .gs-video img")
    assert thumb.get_attribute("src").startswith("data:image/jpeg;base64,")
    _expect(thumb).to_have_js_property("complete", True)  # decoded, as above
    assert thumb.evaluate("img => img.naturalWidth") > 0
    assert page.search("hostile") == 1
    page.open_row()
    assert HOSTILE in p.inner_text("#gs-list .gs-body")  # shown as text, never run
    assert p.evaluate("window.__pwned") is None
    assert page.errors == [] and page.offline() == []


def _rows(p: Any) -> list[tuple[str, list[str], float | None]]:
    """(id, badges, primary value) of each row shown."""
    out = []
    for row in p.locator("#gs-list > details.gs-sample").all():
        badges = row.locator("summary .gs-badge").all_inner_texts()
        pv = row.locator("summary .gs-pv").inner_text().rsplit(" ", 1)[-1]
        out.append((row.get_attribute("data-id"), badges,
                    float(pv.rstrip("%")) / 100 if pv.endswith("%") else None))
    return out


def test_a_contradicted_claim_is_badged_hallucinated_and_filtered(report_page: Page) -> None:
    page, p = report_page, report_page.page
    p.select_option("#gs-flag", "hallucinated")
    assert page.count() == page.rows() == 1
    [(sid, badges, pv)] = _rows(p)
    assert sid == "example_openai:1" and pv == 1.0  # a passing score ...
    assert badges == ["hallucinated"]  # ... with a contradicted claim: not "pass"
    assert "hallucinated (1)" in p.locator("#gs-flag option").all_inner_texts()
    p.select_option("#gs-flag", "judge_failed")
    assert page.count() == page.rows() == 1
    [(sid, badges, _)] = _rows(p)
    assert sid == "example_placeholder:2" and "judge_failed" in badges
    assert page.errors == []


def test_samples_sort_by_score(report_page: Page) -> None:
    page, p = report_page, report_page.page
    shown = page.count()
    for order, sign in (("asc", 1), ("desc", -1)):
        p.select_option("#gs-sort", order)
        rows = _rows(p)
        assert len(rows) == min(shown, 50)
        scored = [pv for _, _, pv in rows if pv is not None]
        assert scored == sorted(scored, key=lambda v: sign * v) and len(set(scored)) > 1
        first_unscored = next(i for i, (_, _, pv) in enumerate(rows) if pv is None)
        assert all(pv is None for _, _, pv in rows[first_unscored:])  # no score: last
    p.select_option("#gs-sort", "")
    assert page.errors == []


def test_screenshot(report_page: Page, tmp_path: Path) -> None:
    p = report_page.page
    p.select_option("#gs-outcome", "fail")
    report_page.open_row()
    shot = tmp_path / "report.png"
    p.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000


def test_comparison_page(browser: Any, runs: tuple[Path, Path], tmp_path: Path) -> None:
    out = write_comparison(compare_runs(runs), tmp_path / "comparison.html")
    page = Page(browser, out)
    assert page.page.locator("#scores tbody tr").count() > 10
    disagreements = page.page.locator("#disagreements tbody tr").count()
    assert disagreements == len(compare_runs(runs).disagreements) > 0
    page.page.screenshot(path=str(tmp_path / "comparison.png"), full_page=True)
    assert page.errors == [] and page.offline() == []
    page.page.close()


def test_render_failure_keeps_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import groundscope.report.html as html_module

    def broken(*_: Any, **__: Any) -> Path:
        raise RuntimeError("renderer exploded")

    monkeypatch.setattr(html_module, "write_html", broken)
    cfg = {"eval_type": "mock", "datasets": ["general_vqa"], "limit": 2,
           "dataset_args": {"general_vqa": {"local_path": str(ROOT / "examples" / "vqa"),
                                            "subset_list": ["example_openai"]}},
           "work_dir": str(tmp_path), "no_timestamp": True}
    with ThreadPoolExecutor(1) as pool:  # its own thread: Playwright's loop may be running here
        report = pool.submit(run_task, cfg).result()
    assert report.dataset("general_vqa").summary.succeeded == 2
    assert list((tmp_path / "reports").glob("*/general_vqa.groundscope.json"))
    assert not (tmp_path / "report.html").exists()
    log = (tmp_path / "logs" / "eval_log.log").read_text()
    assert "could not write report.html: RuntimeError: renderer exploded" in log
