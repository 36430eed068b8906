"""The live view of a long run (issue 14, item 4): next to done (of total), rate and ETA,
the progress display shows the running primary score, requests in flight against the
current limit, retries and 429s so far, tokens and cost so far; plain lines without a
terminal, every PLAIN_EVERY samples or PLAIN_INTERVAL_S seconds."""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundscope import progress, run_task
from groundscope.progress import Progress
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.usage import short_count
from reliability_support import MODEL, dataset_args, samples_of, write_dataset


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def lines() -> Iterator[list[str]]:
    handler = Lines()
    logger = logging.getLogger("groundscope")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield handler.lines
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_every_n_samples_carry_the_status(lines: list[str]) -> None:
    asked = []

    def status() -> str:
        asked.append(1)
        return "rouge-l-r 0.500 | in flight 3/8"

    clock = Clock()
    p = Progress(False, status, total=10, every=4, interval_s=1e9, clock=clock)
    p.open()
    for _ in range(9):
        clock.now += 2.0
        p.advance(1)
    shown = [x for x in lines if "samples done" in x]
    assert shown == ["4/10 samples done (1 errored), 8s, 0.5/s, ETA 12s | rouge-l-r 0.500 | in flight 3/8",
                     "8/10 samples done (1 errored), 16s, 0.5/s, ETA 4s | rouge-l-r 0.500 | in flight 3/8"]
    assert len(asked) == 2  # the status is built per line, not per sample


def test_plain_line_after_the_interval(lines: list[str]) -> None:
    clock = Clock()
    p = Progress(False, lambda: "x", every=1000, interval_s=30.0, clock=clock)
    p.open()
    clock.now += 10
    p.advance(0)
    assert not [x for x in lines if "samples done" in x]
    clock.now += 25  # 35 s since the start
    p.advance(0)
    assert [x for x in lines if "samples done" in x] == ["2 samples done (0 errored), 35s, 0.0571/s | x"]


def test_bar_postfix_is_throttled(capsys: pytest.CaptureFixture[str]) -> None:
    asked = []
    clock = Clock()
    p = Progress(True, lambda: asked.append(1) or "cost 0.01", clock=clock)
    p.open()
    for _ in range(100):
        p.advance(0)  # no time passes: the status is not asked for
    assert asked == []
    clock.now += progress.POSTFIX_EVERY_S
    p.advance(0)
    assert asked == [1]
    p.close()  # the last frame: asked once more, for the final figures
    assert asked == [1, 1] and "cost 0.01" in capsys.readouterr().err


def test_a_run_shows_score_in_flight_retries_429s_tokens_and_cost(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "PLAIN_EVERY", 1)
    data = write_dataset(tmp_path, per_subset=6)
    # every request is answered 429 once (with Retry-After), then succeeds
    server = SimulatorServer(samples_of(data), SimBehaviour(rate_429=1.0, max_faults_per_key=1,
                                                           retry_after_s=0.01))
    server.start()
    try:
        report = run_task(model=MODEL, api_url=server.base_url, datasets=["general_vqa"],
                          dataset_args=dataset_args(data), work_dir=str(tmp_path / "out"),
                          no_timestamp=True, eval_batch_size=4, retry_base_delay=0.01,
                          pricing={MODEL: {"input": 3.0, "output": 15.0}})
    finally:
        server.stop()
    rep = report["general_vqa"]
    log_file = Path(report.run_dir) / "logs" / "eval_log.log"  # the lines as a user sees them
    shown = [x.split("INFO: ", 1)[1] for x in log_file.read_text().splitlines()
             if "samples done" in x]
    assert len(shown) == 12
    last = shown[-1]
    assert last.startswith("12/12 samples done (0 errored), ")
    assert f"{rep.primary_metric} {rep.score():.3f}" in last  # the running score, at the end
    # nothing left in flight, against the current limit: 4 configured, cut by the 429s
    limit = re.search(r"in flight 0/(\d+) ", last)
    assert limit is not None and 1 <= int(limit.group(1)) < 4
    assert "retries 12, 429s 12" in last
    billed = rep.summary.usage.total.billed
    assert billed.requests == 12
    assert f"{short_count(billed.prompt_tokens)} in / {short_count(billed.completion_tokens)} out" in last
    assert f"cost {rep.summary.usage.total.cost:.4g}" in last
    first = shown[0]
    assert re.search(r"retries \d+, 429s \d+", first) and "in flight " in first


def test_judge_clients_of_one_endpoint_show_its_limit_once(tmp_path: Path) -> None:
    """The grounding demo's judge panels (claims, verification, ...) talk to one endpoint
    through one gate: the live view counts its limit once (8, the judge concurrency), not
    once per client or name it is known by."""
    import yaml

    examples = Path(__file__).resolve().parents[1] / "examples"
    cfg = yaml.safe_load((examples / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(examples / "grounding")
    cfg["simulator"]["truth"] = str(examples / "grounding" / "truth.json")
    report = run_task({**cfg, "work_dir": str(tmp_path / "out"), "no_timestamp": True,
                       "eval_batch_size": 8, "judge_concurrency": 8})
    log_file = Path(report.run_dir) / "logs" / "eval_log.log"
    last = [x for x in log_file.read_text().splitlines() if "samples done" in x][-1]
    assert "in flight 0/8, judges 0/8 " in last, last


def _frames(err: str) -> list[str]:
    """What a terminal shows, redraw by redraw: the text between carriage returns and
    line ends, blanks (a cleared bar) left out."""
    return [f for f in re.split(r"[\r\n]", err) if f.strip()]


def test_the_bar_shows_errors_and_at_120_columns_the_figures_come_first(
        capsys: pytest.CaptureFixture[str]) -> None:
    status = "rouge-l-r 0.734 | in flight 7/8 | retries 2, 429s 0 | 12.3k in / 4.5k out"
    p = Progress(True, lambda: status, total=10, columns=100)
    p.open()
    p.advance(0)
    p.advance(1)  # a failure: the count shows at once, however recent the last postfix
    p.close()
    last = _frames(capsys.readouterr().err)[-1]
    assert len(last) <= 100
    assert re.match(r"Evaluating 2/10 +20% ETA \S+, errored 1 \| rouge-l-r 0\.734 \| ", last), last


def test_log_lines_are_written_through_the_bar_not_glued_onto_it(
        capsys: pytest.CaptureFixture[str]) -> None:
    from groundscope import logs

    logs.configure()
    try:
        p = Progress(True, None, total=3, columns=100)
        p.open()
        p.advance(0)
        logging.getLogger("groundscope").warning("skipped bad record: x.jsonl:2")
        p.advance(0)
        p.close()
    finally:
        logs.close()
    frames = _frames(capsys.readouterr().err)
    logged = [f for f in frames if "skipped bad record" in f]
    assert len(logged) == 1 and re.match(r"\d{4}-\d\d-\d\d \S+ - groundscope - WARNING: "
                                         r"skipped bad record: x\.jsonl:2$", logged[0]), frames
