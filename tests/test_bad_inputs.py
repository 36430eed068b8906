"""Bad input: every malformed record is one exact line ``file:line: field: problem``; bad
records are skipped and counted (fatal with ``--strict``); a bad config is one line with a
did-you-mean before any request; no traceback for a user error; media guards (pixel cap,
size cap).

The corpus is ``tests/bad_inputs/``: one small file per defect (``make_corpus.py`` writes
them), with the exact expected line of each in ``expected.json``.
"""

from __future__ import annotations

import contextvars
import json
import logging
import os
import pwd
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from groundscope import media
from groundscope.config import load_config
from groundscope.dataset import load_samples
from groundscope.errors import MediaError, RecordError
from groundscope.runner import iter_samples, plan_dataset
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.types import MediaRef, Modality, Sample
from reliability_support import run_cli

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
EXPECTED: dict[str, dict[str, str]] = json.loads((CORPUS / "expected.json").read_text())


class _Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


@pytest.fixture
def warnings_seen() -> Any:
    logger = logging.getLogger("groundscope")
    handler, old = _Lines(), logger.propagate
    logger.addHandler(handler)
    yield handler.lines
    logger.removeHandler(handler)
    logger.propagate = old


def _messages(fmt: str, path: Path, warnings: list[str]) -> tuple[list[str], int]:
    """(problem lines, good samples) of loading one dataset file."""
    errors, good = [], 0
    for _, item in load_samples(fmt, path):
        if isinstance(item, RecordError):
            errors.append(str(item))
        else:
            good += 1
    return errors or list(warnings), good


def test_the_corpus_covers_every_defect() -> None:
    files = sorted(p.name for p in CORPUS.iterdir() if p.suffix in (".jsonl", ".tsv"))
    assert len(files) >= 20
    assert files == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_one_exact_line_per_bad_record(name: str, warnings_seen: list[str], tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # relative media are looked for here too: part of one message
    case = EXPECTED[name]
    lines, good = _messages(case["format"], CORPUS / name, warnings_seen)
    expected = case["message"].format(dir=CORPUS, cwd=tmp_path)
    assert lines == [expected]
    # An error skips the record; a warning (a medium dropped from the prompt, as the
    # format specifies) keeps it.
    assert good == (1 if case["kind"] == "warning" else 0)


def _unprivileged(fn: Callable[[], str]) -> str:
    """``fn()``, in a forked child running as 'nobody' when this process is root (root reads
    files whatever their mode; CI runs as root), else here. ``fn`` must need no new imports:
    the child may not be able to read the interpreter's files."""
    if os.geteuid() != 0:
        return fn()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop privileges, run, send the result back, never return
        code = 1
        try:
            os.close(read)
            nobody = pwd.getpwnam("nobody")
            os.setgroups([])
            os.setgid(nobody.pw_gid)
            os.setuid(nobody.pw_uid)
            os.write(write, fn().encode())
            code = 0
        except BaseException as exc:
            os.write(write, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as pipe:
        out = pipe.read().decode()
    assert os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0, out
    return out


def test_unreadable_media_file() -> None:
    root = Path(tempfile.mkdtemp(prefix="groundscope-unreadable-"))  # not under root's 0700 dirs
    try:
        root.chmod(0o755)
        for name in ("warm.jpg", "locked.jpg"):
            shutil.copy(CORPUS / "media" / "good.jpg", root / name)
            line = json.dumps({"messages": [{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": name}}]}]})
            (root / f"{name}.jsonl").write_text(line + "\n")

        def load_one(name: str) -> object:
            (item,) = [it for _, it in load_samples("general_vqa", root / f"{name}.jsonl")]
            return item

        assert isinstance(load_one("warm.jpg"), Sample)  # readable (and every import done)
        image = root / "locked.jpg"
        image.chmod(0)
        assert _unprivileged(lambda: str(load_one("locked.jpg"))) == (
            f"{root}/locked.jpg.jsonl:1: messages[0].content[0].image_url.url: "
            f"cannot read {image}: Permission denied")
    finally:
        shutil.rmtree(root)


# ------------------------------------------------------------------ media guards


def test_pixel_cap_is_configurable_and_checked_at_load_and_at_send(tmp_path: Path) -> None:
    good = CORPUS / "media" / "good.jpg"  # 160x120
    ref = MediaRef(Modality.IMAGE, str(good))

    def capped() -> str:
        media.set_max_pixels(1000)
        errors = []
        for check in (lambda: media.check(ref), lambda: media.check(ref, decode=False),
                      lambda: media.wire_part(ref)):
            with pytest.raises(MediaError) as info:
                check()
            errors.append(str(info.value))
        assert len(set(errors)) == 1
        return errors[0]

    message = contextvars.copy_context().run(capped)
    assert message == (f"{good}: image of 160x120 = 19200 pixels is over the limit of 1000 "
                       "(max_image_pixels; a decompression bomb?)")
    assert media.wire_part(ref)["image_url"]["url"].startswith("data:image/jpeg;base64,")
    assert media.max_pixels() == media.DEFAULT_MAX_PIXELS  # the cap did not leak


def test_size_cap(tmp_path: Path) -> None:
    ref = MediaRef(Modality.IMAGE, str(CORPUS / "media" / "good.jpg"))
    with pytest.raises(MediaError, match=r"good\.jpg is too big: 2924 bytes > limit 1000$"):
        media.check(ref, max_bytes=1000)


def test_remote_media_are_never_fetched() -> None:
    ref = MediaRef(Modality.IMAGE, "http://127.0.0.1:9/never.jpg")
    assert media.wire_part(ref) == {"type": "image_url",
                                    "image_url": {"url": ref.source, "detail": "auto"}}
    with pytest.raises(MediaError, match="passed through, never fetched"):
        media.load(ref)


# ------------------------------------------------------------------ a run over good and bad


GOOD_LINE = {"messages": [{"role": "user", "content": [
    {"type": "text", "text": "Which animal is this, number {i}?"},
    {"type": "image_url", "image_url": {"url": "media/good.jpg"}}]}], "answer": "A dog, number {i}."}


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str], int]:
    """A dataset whose file interleaves 12 good records with every VQA defect of the corpus."""
    root = tmp_path_factory.mktemp("mixed")
    shutil.copytree(CORPUS / "media", root / "media")
    bad = [n for n in sorted(EXPECTED)
           if n.endswith(".jsonl") and EXPECTED[n]["format"] == "general_vqa"
           and EXPECTED[n]["kind"] == "error"]
    lines, expected = [], []
    path = root / "mixed.jsonl"
    for i in range(max(12, len(bad))):
        if i < 12:
            lines.append(json.dumps(GOOD_LINE).replace("{i}", str(i)))
        if i < len(bad):
            lines.append((CORPUS / bad[i]).read_text().rstrip("\n"))
            rest = EXPECTED[bad[i]]["message"].split(":1: ", 1)[1]
            expected.append(f"{path}:{len(lines)}: " + rest.format(dir=root, cwd=root))
    path.write_text("\n".join(lines) + "\n")
    return root, expected, 12


def _args(root: Path, url: str, work: Path, *extra: str) -> list[str]:
    args = {"general_vqa": {"local_path": str(root), "subset_list": ["mixed"]}}
    return ["eval", "--model", "m", "--api-url", url, "--datasets", "general_vqa",
            "--dataset-args", json.dumps(args), "--work-dir", str(work), "--no-timestamp",
            "--no-progress", *extra]


@pytest.fixture(scope="module")
def server(mixed: tuple[Path, list[str], int]) -> Any:
    root = mixed[0]
    cfg = load_config({"datasets": ["general_vqa"], "eval_type": "mock", "dataset_args": {
        "general_vqa": {"local_path": str(root), "subset_list": ["mixed"]}}})
    samples = [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vqa"), strict=False)
               if not isinstance(s, RecordError)]
    with SimulatorServer(samples, SimBehaviour(accuracy=1.0)) as url:
        yield url


@pytest.mark.slow
def test_good_records_are_scored_and_bad_ones_counted(mixed: tuple, server: str,
                                                     tmp_path: Path) -> None:
    root, expected, n_good = mixed
    run_dir = tmp_path / "run"
    # the API's own formats: flac is refused as such (converted to wav, it is checked by
    # decoding: tests/test_untrusted_video.py)
    proc = run_cli(_args(root, server, run_dir, "--no-audio-transcode"), cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    logged = [line.split(" - WARNING: skipped bad record: ", 1)[1]
              for line in proc.stderr.splitlines() if "skipped bad record: " in line]
    assert logged == expected
    saved = [json.loads(line)["problem"] for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    assert saved == expected
    counts = f"requested {n_good}, succeeded {n_good}, errored 0, skipped {len(expected)} bad records"
    assert counts in proc.stdout
    report = json.loads((run_dir / "reports" / "m" / "general_vqa.groundscope.json").read_text())
    assert report["summary"]["skipped"] == len(expected) and report["summary"]["requested"] == n_good
    rouge = next(r for r in report["metrics"] if r["metric"] == "rouge-l-r")
    assert (rouge["num"], rouge["score"]) == (n_good, 1.0)
    # Resumed (twice), the bad records are still counted once.
    for _ in range(2):
        again = run_cli(_args(root, server, tmp_path / "unused", "--use-cache", str(run_dir),
                              "--no-audio-transcode"), cwd=root)
        assert again.returncode == 0, again.stderr
        assert f"skipped {len(expected)} bad records" in again.stdout
    saved = [json.loads(line)["problem"] for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    assert saved == expected
    rebuilt = run_cli(["report", str(run_dir)], cwd=root)
    assert rebuilt.returncode == 0, rebuilt.stderr
    report = json.loads((run_dir / "reports" / "m" / "general_vqa.groundscope.json").read_text())
    assert report["summary"]["skipped"] == len(expected)


def test_strict_makes_the_first_bad_record_fatal_before_any_request(mixed: tuple, tmp_path: Path) -> None:
    root, expected, _ = mixed
    fresh = SimulatorServer()  # it must see no request at all
    url = fresh.start()
    try:
        proc = run_cli(_args(root, url, tmp_path / "run", "--strict"), cwd=root)
        assert fresh.stats()["requests"] == 0
    finally:
        fresh.stop()
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == f"groundscope: error: {expected[0]}"
    assert not list((tmp_path / "run").glob("predictions/**/*.jsonl"))


# ------------------------------------------------------------------ user errors: one line


USER_ERRORS = [
    (["--dataset-args", '{"general_vqa": {"local_pth": "data"}}'],
     "dataset_args.general_vqa: unknown key 'local_pth' (did you mean 'local_path'?)"),
    (["--datasets", "general_vqq"],
     "datasets: unknown dataset 'general_vqq' (did you mean 'general_vqa'?); known: "),
    (["--config", "cfg.yaml"], "config: unknown key 'eval_batch_sise' (did you mean 'eval_batch_size'?)"),
    (["--dataset-args", '{"general_vqa": {"local_path": "data", "metric_list": ["Rogue"]}}'],
     "dataset_args.general_vqa.metric_list: unknown metric 'Rogue' (did you mean 'rouge'?)"),
    (["--dataset-args", '{"general_vqa": {"local_path": "nowhere"}}'],
     "dataset path does not exist: nowhere"),
    (["--api-url", "ftp://127.0.0.1/v1"], "api_url must be an http(s) URL (got ftp scheme)"),
    (["--dataset-args", '{"general_vqa": {"local_path": "data", "subset_list": ["gamma"]}}'],
     "no file for subset 'gamma' (split 'test') in data: expected one of gamma_test.jsonl"),
    (["--use-cache", "no-such-run"], "use_cache: run directory not found: no-such-run"),
    (["--config", "missing.yaml"], "config file not found: missing.yaml"),
    (["--api-key", "$GS_UNSET_VARIABLE"], "api_key: environment variable GS_UNSET_VARIABLE is not set"),
    (["--max-image-pixels", "0"], "max_image_pixels: Input should be greater than or equal to 1"),
    (["--eval-type", "mokc"], "eval_type: Input should be 'openai_api', 'anthropic_api', "
                              "'openai_responses_api', 'mock' or 'answers'"),
]


@pytest.mark.parametrize(("extra", "message"), USER_ERRORS, ids=[m[:30] for _, m in USER_ERRORS])
def test_user_errors_are_one_line_before_any_request(extra: list[str], message: str,
                                                     tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "alpha.jsonl").write_text(json.dumps(GOOD_LINE) + "\n")
    (tmp_path / "cfg.yaml").write_text("eval_batch_sise: 4\n")
    base = ["eval", "--model", "m", "--datasets", "general_vqa", "--dataset-args",
            '{"general_vqa": {"local_path": "data"}}', "--work-dir", "out", "--no-progress"]
    fresh = SimulatorServer()
    url = fresh.start()
    try:
        proc = run_cli([*base, "--api-url", url, *extra], cwd=tmp_path)
        assert fresh.stats()["requests"] == 0
    finally:
        fresh.stop()
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"groundscope: error: {message}"), proc.stderr
    assert not (tmp_path / "out").exists()  # detected before a run directory is made


@pytest.mark.slow
def test_a_bad_byte_mid_file_is_one_skipped_record(tmp_path: Path) -> None:
    """A row with bytes that are not UTF-8 far into a TSV is one bad record (its physical
    line, the column) while the task group is sending requests: the run goes on to its report."""
    (tmp_path / "data").mkdir()
    rows = ["messages\tanswer"] + [
        f'[{{"role": "user", "content": "Question {i}?"}}]\tAnswer {i}' for i in range(3000)]
    raw = ("\n".join(rows) + "\n").encode() + b'[{"role": "user", "content": "\xff\xfe"}]\tx\n'
    (tmp_path / "data" / "alpha.tsv").write_bytes(raw)
    args = {"general_vqa": {"local_path": "data"}}
    with SimulatorServer() as url:
        proc = run_cli(["eval", "--api-url", url, "--datasets", "general_vqa", "--dataset-args",
                        json.dumps(args), "--work-dir", "out", "--no-progress"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "requested 3000, succeeded 3000, errored 0, skipped 1 bad record" in proc.stdout
    (skipped,) = [json.loads(line) for p in tmp_path.glob("out/*/skipped.jsonl")
                  for line in p.read_text().splitlines()]
    assert skipped["problem"] == ("data/alpha.tsv:3002: messages: not valid UTF-8 "
                                  "(byte 0xff at character 31)")


def test_a_flood_of_bad_records_is_logged_a_bounded_number_of_lines(tmp_path: Path) -> None:
    """Each bad record is one warning line up to LOGGED_BAD_RECORDS per dataset, then one
    line saying the rest are not logged; every one is still in skipped.jsonl and counted."""
    from groundscope.feed import LOGGED_BAD_RECORDS

    bad = LOGGED_BAD_RECORDS + 25
    good = [{"id": f"g{i}", "messages": [{"role": "user", "content": "Name it."}],
             "answer": "a cat"} for i in range(3)]
    lines = [json.dumps(r) for r in good] + [f'{{"id": "b{i}", "answer": ' for i in range(bad)]
    (tmp_path / "flood.jsonl").write_text("\n".join(lines) + "\n")
    args = {"general_vqa": {"local_path": str(tmp_path), "subset_list": ["flood"]}}
    run_dir = tmp_path / "run"
    proc = run_cli(["eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                    json.dumps(args), "--work-dir", str(run_dir), "--no-timestamp",
                    "--no-progress"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    logged = [line for line in proc.stderr.splitlines() if "skipped bad record: " in line]
    assert len(logged) == LOGGED_BAD_RECORDS
    assert "flood.jsonl:4: " in logged[0] and "flood.jsonl:53: " in logged[-1]
    more = [line for line in proc.stderr.splitlines() if "the rest are not logged" in line]
    assert len(more) == 1 and str(run_dir / "skipped.jsonl") in more[0]
    assert len((run_dir / "skipped.jsonl").read_text().splitlines()) == bad
    assert f"skipped {bad} bad records" in proc.stdout
