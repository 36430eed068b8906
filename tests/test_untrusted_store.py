"""The run directory under hostile conditions (issue 12, items 4, 5, 6, 9, 10).

- ``groundscope score`` killed, or meeting a judge reply no contract foresaw, leaves the saved
  reviews as they were; ``report`` says when predictions have no score.
- ``--use-cache`` / ``--no-timestamp`` never write into a directory that is not a groundscope
  run (or empty); a work directory holding runs resumes its latest run, and says which.
- Sample ids are unique per subset: two subsets both numbering from 1 keep all their samples.
- A full disk (a real one: a small tmpfs, when this process may mount one; and a writer with a
  quota at the file boundary, everywhere) is one line naming the file, leaves no torn
  config.json, and the run resumes; a torn config.json is one line for every command.
- Resume decides by content: media with new dates but the same bytes are not asked again.

Hostile inputs live in ``tests/untrusted/store/``.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import signal
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from groundscope import run_task
from groundscope.errors import StoreError
from groundscope.simulator.judge import JudgeResponder
from groundscope.simulator.server import SimBehaviour, SimulatorServer
from reliability_support import (
    EXAMPLE_MEDIA,
    MODEL,
    GatedSimulator,
    assert_exactly_once,
    complete_lines,
    dataset_args,
    eval_args,
    popen_cli,
    report_numbers,
    rows,
    run_cli,
    samples_of,
    write_dataset,
)

CORPUS = Path(__file__).parent / "untrusted" / "store"
BEHAVIOUR = SimBehaviour(accuracy=0.7, seed=5)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("store"))


@pytest.fixture(scope="module")
def samples(data: Path) -> list:
    return samples_of(data)


@pytest.fixture(scope="module")
def server(samples: list) -> Iterator[SimulatorServer]:
    sim = SimulatorServer(samples, BEHAVIOUR)
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def finished(data: Path, server: SimulatorServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run (bleu and rouge scores), to be copied by tests that change it."""
    run_dir = tmp_path_factory.mktemp("finished") / "run"
    # fast retries: `score` against a broken judge retries with the run's delays
    proc = run_cli(eval_args(server.base_url, data, run_dir, "--retry-base-delay", "0.01",
                             "--retry-max-delay", "0.05"), cwd=run_dir.parent)
    assert proc.returncode == 0, proc.stderr
    return run_dir


def copy_run(finished: Path, tmp_path: Path) -> Path:
    run_dir = tmp_path / "run"
    shutil.copytree(finished, run_dir)
    return run_dir


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under ``root`` with its bytes (None for a directory)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes()
            for p in sorted(root.rglob("*"))}


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    """The single ``groundscope: error:`` line of a failed command (and no traceback)."""
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("groundscope: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def review_files(run_dir: Path) -> dict[str, bytes]:
    """The reviews files a report reads (a killed ``score``'s file aside is not one)."""
    return {p.name: p.read_bytes() for p in sorted((run_dir / "reviews" / MODEL).glob("*.jsonl"))
            if not p.name.startswith(".")}


def judge_flag(url: str) -> str:
    return json.dumps({"strategy": "llm", "models": {"model_id": "judge", "api_url": url}})


# ------------------------------------------------------------------ item 4: groundscope score


def test_killed_score_keeps_the_old_reviews(finished: Path, tmp_path: Path) -> None:
    """SIGKILL while ``score`` waits on its judge: the reviews are byte for byte as before,
    ``report`` gives the same numbers, and a later ``score`` completes."""
    run_dir = copy_run(finished, tmp_path)
    before, numbers = review_files(run_dir), report_numbers(run_dir)
    judge = GatedSimulator(responders=[JudgeResponder()], open_for=10)
    url = judge.start()
    try:
        proc = popen_cli(["score", str(run_dir), "--judge", judge_flag(url)], cwd=tmp_path)
        try:
            deadline = time.monotonic() + 60
            while judge.arrived <= judge.open_for:  # a judge request is being held: mid-way
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "score never reached its judge"
                time.sleep(0.01)
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        finally:
            proc.kill()
    finally:
        judge.stop()
    assert proc.returncode == -signal.SIGKILL
    assert review_files(run_dir) == before
    report = run_cli(["report", str(run_dir)], cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    assert "no score" not in report.stderr
    assert report_numbers(run_dir) == numbers
    with SimulatorServer(responders=[JudgeResponder()]) as url:
        again = run_cli(["score", str(run_dir), "--judge", judge_flag(url)], cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert not [p for p in (run_dir / "reviews").rglob("*") if p.name.startswith(".")]
    assert Counter(r["scorer"] for r in rows(run_dir, "reviews")) == {"accuracy": 60}


def _malformed_judge() -> tuple[web.AppRunner, str]:
    """A judge endpoint whose every reply is HTTP 200 with a body the API never promises."""

    async def reply(_request: web.Request) -> web.Response:
        return web.json_response({"choices": [{"message": "hi"}]})

    app = web.Application()
    app.router.add_post("/v1/chat/completions", reply)
    return web.AppRunner(app), "/v1"


def test_judge_crash_during_score_is_a_failed_score(finished: Path, tmp_path: Path) -> None:
    """A judge reply that breaks the scorer is recorded per sample, as during ``eval``: a
    score with a failure status, excluded and counted; no traceback, the run completes."""
    import asyncio
    import threading

    run_dir = copy_run(finished, tmp_path)
    loop = asyncio.new_event_loop()
    runner, prefix = _malformed_judge()
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        proc = run_cli(["score", str(run_dir), "--judge",
                        judge_flag(f"http://127.0.0.1:{port}{prefix}")], cwd=tmp_path)
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.run_until_complete(runner.cleanup())
        loop.close()
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    judged = rows(run_dir, "reviews")
    assert Counter(r["scorer"] for r in judged) == {"accuracy": 60}
    assert {r["status"] for r in judged} <= {"error", "judge_failed"}, judged[0]


def test_report_says_when_predictions_have_no_score(finished: Path, tmp_path: Path) -> None:
    """Reviews lost (e.g. an older ``score`` killed): ``report`` names the subset and how
    many of its predictions have no score, on the terminal and in the JSON summary."""
    run_dir = copy_run(finished, tmp_path)
    path = run_dir / "reviews" / MODEL / "general_vqa_alpha.jsonl"
    kept = path.read_bytes().splitlines(keepends=True)[:13]
    path.write_bytes(b"".join(kept))
    scored = Counter(json.loads(line)["sample_id"] for line in kept)
    missing = 30 - sum(1 for n in scored.values() if n == 2)
    proc = run_cli(["report", str(run_dir)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    line = (f"general_vqa/alpha: {missing} of 30 predictions have no score; "
            f"run groundscope score {run_dir}")
    assert f"groundscope: warning: {line}" in proc.stderr.splitlines()
    assert "beta" not in proc.stderr
    report_path = run_dir / "reports" / MODEL / "general_vqa.groundscope.json"
    summary = json.loads(report_path.read_text())["summary"]
    assert summary["unscored"] == {"alpha": missing}
    assert summary["warnings"] == [line]
    assert line in (run_dir / "report.html").read_text()


# ------------------------------------------------------------------ item 5: whose directory


def _foreign_dirs(root: Path, finished: Path) -> dict[str, Path]:
    """Directories groundscope must not write into: another tool's, a torn config, an
    empty config (what an older version left on a full disk)."""
    out = {}
    out["files"] = root / "files"
    (out["files"] / "sub").mkdir(parents=True)
    (out["files"] / "sub" / "keep.txt").write_text("mine\n")
    (out["files"] / "notes.txt").write_text("mine too\n")
    out["foreign_config"] = root / "foreign_config"
    shutil.copytree(CORPUS / "foreign", out["foreign_config"])
    for name, cut in (("torn_config", 0.5), ("empty_config", 0.0)):
        out[name] = root / name
        out[name].mkdir()
        raw = (finished / "config.json").read_bytes()
        (out[name] / "config.json").write_bytes(raw[: int(len(raw) * cut)])
        (out[name] / "predictions").mkdir()
    return out


@pytest.mark.parametrize("flag", ["--use-cache", "--no-timestamp"])
def test_foreign_dirs_are_refused_before_anything_is_written(
        data: Path, server: SimulatorServer, finished: Path, tmp_path: Path, flag: str) -> None:
    server.reset()
    for kind, target in _foreign_dirs(tmp_path, finished).items():
        before = snapshot(target)
        if flag == "--use-cache":
            args = eval_args(server.base_url, data, tmp_path / "unused", "--use-cache", str(target))
        else:
            args = eval_args(server.base_url, data, target)
        line = one_line_error(run_cli(args, cwd=tmp_path))
        assert str(target) in line, (kind, line)
        assert snapshot(target) == before, kind
        assert not (tmp_path / "unused").exists()
    assert server.stats()["requests"] == 0


@pytest.mark.slow
def test_use_cache_of_a_work_dir_resumes_its_latest_run(
        data: Path, server: SimulatorServer, tmp_path: Path) -> None:
    """A user passes the --work-dir they used: the latest run in it is resumed (said on
    stderr), nothing is written next to the runs; a run written before the marker (its
    config.json has no "format") is recognised by its shape."""
    work = tmp_path / "outputs"
    first = eval_args(server.base_url, data, work, "--limit", "3")
    first.remove("--no-timestamp")
    assert run_cli(first, cwd=tmp_path).returncode == 0
    second = [a for a in eval_args(server.base_url, data, work) if a != "--no-timestamp"]
    assert run_cli(second, cwd=tmp_path).returncode == 0
    old, latest = sorted(work.iterdir())
    config = json.loads((latest / "config.json").read_text())
    config.pop("format", None)  # as written by the version before the marker
    (latest / "config.json").write_text(json.dumps(config))
    server.reset()
    proc = run_cli(eval_args(server.base_url, data, tmp_path / "unused", "--use-cache", str(work)),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert f"resuming the latest, {latest}" in proc.stderr
    assert server.stats()["requests"] == 0  # every sample was finished in the latest run
    assert sorted(work.iterdir()) == [old, latest]
    assert_exactly_once(latest, {s.id for s in samples_of(data)})


def test_no_timestamp_over_a_run_is_refused_not_overwritten(
        finished: Path, data: Path, server: SimulatorServer, tmp_path: Path) -> None:
    run_dir = copy_run(finished, tmp_path)
    before = snapshot(run_dir)
    server.reset()
    line = one_line_error(run_cli(eval_args(server.base_url, data, run_dir), cwd=tmp_path))
    assert f"--use-cache {run_dir}" in line
    assert snapshot(run_dir) == before
    assert server.stats()["requests"] == 0


# ------------------------------------------------------------------ item 6: ids per subset


def _dup_dataset(kind: str, root: Path) -> tuple[str, Path, list[str]]:
    if kind == "jsonl":
        shutil.copytree(CORPUS / "dup_ids", root / "data")
        return "general_vqa", root / "data", ["first", "second"]
    shutil.copytree(CORPUS / "dup_legacy", root / "data")
    for name in ("dog.jpg", "beach.jpg", "running.jpg", "tokyo.jpg"):
        shutil.copy(EXAMPLE_MEDIA / name, root / "data" / name)
    return "legacy_vqa", root / "data", ["part1", "part2"]


@pytest.mark.parametrize("kind", ["jsonl", "legacy_tsv"])
def test_duplicate_ids_across_subsets_keep_every_subset(kind: str, tmp_path: Path) -> None:
    from cli_support import dataset_samples
    from groundscope.report.compare import compare_runs
    from groundscope.report.rundata import load_run

    name, path, subsets = _dup_dataset(kind, tmp_path)
    args = {name: {"local_path": str(path), "subset_list": subsets}}
    cfg = {"model": MODEL, "datasets": [name], "dataset_args": args,
           "work_dir": str(tmp_path / "run"), "no_timestamp": True}
    with SimulatorServer(dataset_samples(name, args), SimBehaviour(accuracy=1.0)) as url:
        report = run_task({**cfg, "api_url": url}).dataset(name)
    run_dir = tmp_path / "run"
    assert report.subsets == subsets and report.summary.skipped == 0
    assert report.summary.requested == 10
    primary = report.primary_metric
    assert [report.row(primary, s).num for s in subsets] == [5, 5]  # type: ignore[union-attr]
    for subset in subsets:
        ids = [r["sample_id"] for r in complete_lines(
            run_dir / "predictions" / MODEL / f"{name}_{subset}.jsonl")]
        assert sorted(ids) == ["1", "2", "3", "4", "5"]
    server = SimulatorServer(dataset_samples(name, args), SimBehaviour(accuracy=1.0))
    url = server.start()
    try:  # resume: every sample of both subsets is found, none asked again
        resumed = run_task({**cfg, "api_url": url, "use_cache": str(run_dir)}).dataset(name)
        assert server.stats()["requests"] == 0
    finally:
        server.stop()
    assert resumed.metrics == report.metrics
    proc = run_cli(["report", str(run_dir)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads((run_dir / "reports" / MODEL / f"{name}.groundscope.json").read_text())["metrics"] == [
        r.model_dump(mode="json") for r in report.metrics]
    assert Counter(r.subset for r in load_run(run_dir).samples()) == dict.fromkeys(subsets, 5)
    assert compare_runs([run_dir, run_dir]).matched == {name: 10}


def test_subsets_that_would_share_an_output_file_are_refused(tmp_path: Path) -> None:
    shutil.copytree(CORPUS / "collide", tmp_path / "data")
    with SimulatorServer() as url:
        proc = run_cli(["eval", "--model", MODEL, "--api-url", url, "--datasets", "general_vqa",
                        "--dataset-args", json.dumps({"general_vqa": {
                            "local_path": str(tmp_path / "data")}}),
                        "--work-dir", str(tmp_path / "out"), "--no-progress"], cwd=tmp_path)
    line = one_line_error(proc)
    assert "'a b'" in line and "'a_b'" in line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ item 9: a full disk


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs: a real disk that fills (skipped where mounting is not allowed)."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _grow(mount: Path) -> None:
    subprocess.run(["mount", "-o", "remount,size=16m", str(mount)], check=True)


def _fill(mount: Path) -> Path:
    """Take every free byte of ``mount``; the filler file, to delete to free them again."""
    filler = mount / "filler"
    with filler.open("wb", buffering=0) as fh:
        try:
            while True:
                fh.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


def _disk_full_line(proc: subprocess.CompletedProcess) -> str:
    line = one_line_error(proc)
    assert "no space left on device" in line, line
    return line


@pytest.mark.slow
def test_disk_full_mid_run_is_one_line_and_resumable(
        data: Path, samples: list, server: SimulatorServer, finished: Path, tmp_path: Path,
        small_disk: Path) -> None:
    run_dir = small_disk / "run"
    proc = run_cli(eval_args(server.base_url, data, run_dir), cwd=tmp_path)
    line = _disk_full_line(proc)
    assert f"--use-cache {run_dir}" in line and str(run_dir) in line
    assert json.loads((run_dir / "config.json").read_text())["model"] == MODEL  # whole
    _grow(small_disk)
    proc = run_cli(eval_args(server.base_url, data, tmp_path / "unused", "--use-cache",
                             str(run_dir)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_exactly_once(run_dir, {s.id for s in samples})
    assert report_numbers(run_dir)["metrics"] == report_numbers(finished)["metrics"]


@pytest.mark.slow
def test_disk_full_at_start_leaves_no_torn_config(
        data: Path, samples: list, server: SimulatorServer, tmp_path: Path,
        small_disk: Path) -> None:
    filler = _fill(small_disk)
    run_dir = small_disk / "run"
    _disk_full_line(run_cli(eval_args(server.base_url, data, run_dir), cwd=tmp_path))
    assert not (run_dir / "config.json").exists()  # none rather than 0 bytes
    filler.unlink()
    _grow(small_disk)
    proc = run_cli(eval_args(server.base_url, data, tmp_path / "unused", "--use-cache",
                             str(run_dir)), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert_exactly_once(run_dir, {s.id for s in samples})


def test_score_on_a_full_disk_keeps_the_old_reviews(finished: Path, tmp_path: Path,
                                                    small_disk: Path) -> None:
    _grow(small_disk)
    run_dir = small_disk / "run"
    shutil.copytree(finished, run_dir)
    before = review_files(run_dir)
    filler = _fill(small_disk)
    with SimulatorServer(responders=[JudgeResponder()]) as url:
        proc = run_cli(["score", str(run_dir), "--judge", judge_flag(url)], cwd=tmp_path)
    assert "the saved reviews are unchanged" in _disk_full_line(proc)
    assert review_files(run_dir) == before
    assert not [p for p in (run_dir / "reviews").rglob(".*")]
    filler.unlink()  # space again: the same command now completes
    with SimulatorServer(responders=[JudgeResponder()]) as url:
        proc = run_cli(["score", str(run_dir), "--judge", judge_flag(url)], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert {r["status"] for r in rows(run_dir, "reviews")} == {"ok"}


class _Quota:
    """Files opened for writing under ``root`` share ``left`` bytes; past it, a write fails
    as on a full disk (ENOSPC). Patched in at ``Path.open`` / ``open``: the file boundary."""

    def __init__(self, root: Path, left: int) -> None:
        self.root, self.left = str(root), left

    def wrap(self, fh: Any, path: Any, mode: str) -> Any:
        if not str(path).startswith(self.root) or not any(c in mode for c in "wa+"):
            return fh
        quota = self

        class Proxy:
            def __init__(self) -> None:
                self._fh = fh

            def write(self, data: Any) -> int:
                if quota.left < len(data):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
                quota.left -= len(data)
                return self._fh.write(data)

            def __getattr__(self, name: str) -> Any:
                return getattr(self._fh, name)

            def __enter__(self) -> Any:
                return self

            def __exit__(self, *exc: object) -> None:
                self._fh.close()

            def __iter__(self) -> Any:
                return iter(self._fh)

        return Proxy()


def test_quota_full_mid_run_is_a_store_error_and_resumable(
        data: Path, samples: list, server: SimulatorServer, finished: Path, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a mountable disk: the same class, at the file boundary, in process."""
    run_dir = tmp_path / "run"
    quota = _Quota(run_dir, 40_000)
    real_open = Path.open

    def limited_open(self: Path, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        return quota.wrap(real_open(self, mode, *args, **kwargs), self, mode)

    cfg = {"model": MODEL, "api_url": server.base_url, "datasets": ["general_vqa"],
           "dataset_args": dataset_args(data), "work_dir": str(run_dir), "no_timestamp": True}
    import groundscope.fileio as fileio_mod
    import groundscope.jsonl as jsonl_mod

    real_regular, real_fresh = fileio_mod.open_regular, fileio_mod.create_fresh

    def limited_regular(path: Path, flags: int = os.O_RDONLY, mode: int = 0o644) -> Any:
        return quota.wrap(real_regular(path, flags, mode), path,
                          "ab" if flags & os.O_APPEND else "rb")

    def limited_fresh(path: Path) -> Any:
        return quota.wrap(real_fresh(path), path, "wb")

    monkeypatch.setattr(Path, "open", limited_open)  # the run's writes, at the file boundary
    monkeypatch.setattr(jsonl_mod, "open_regular", limited_regular)
    monkeypatch.setattr(jsonl_mod, "create_fresh", limited_fresh)
    monkeypatch.setattr(fileio_mod, "create_fresh", limited_fresh)
    with pytest.raises(StoreError) as info:
        run_task(cfg)
    message = str(info.value)
    assert "\n" not in message and "no space left on device" in message
    assert f"--use-cache {run_dir}" in message
    assert json.loads((run_dir / "config.json").read_text())["model"] == MODEL
    monkeypatch.undo()
    run_task({**cfg, "use_cache": str(run_dir)})
    assert_exactly_once(run_dir, {s.id for s in samples})
    assert report_numbers(run_dir)["metrics"] == report_numbers(finished)["metrics"]


@pytest.mark.parametrize("cut", [0.0, 0.5])
def test_a_torn_config_is_one_line_for_every_command(
        finished: Path, data: Path, server: SimulatorServer, tmp_path: Path, cut: float) -> None:
    run_dir = copy_run(finished, tmp_path)
    raw = (run_dir / "config.json").read_bytes()
    (run_dir / "config.json").write_bytes(raw[: int(len(raw) * cut)])
    for args in (["score", str(run_dir)], ["report", str(run_dir)],
                 ["report", str(run_dir), str(finished)],
                 eval_args(server.base_url, data, tmp_path / "unused", "--use-cache", str(run_dir))):
        line = one_line_error(run_cli(args, cwd=tmp_path))
        assert f"{run_dir / 'config.json'}" in line, line


# ------------------------------------------------------------------ item 10: reuse by content


@pytest.mark.slow
def test_same_bytes_with_new_dates_are_not_asked_again(
        data: Path, samples: list, finished: Path, tmp_path: Path) -> None:
    run_dir = copy_run(finished, tmp_path)
    media = tmp_path / "data" / "media"
    shutil.copytree(data, tmp_path / "data")  # a copy: same bytes, new dates
    later = time.time() + 3600
    for path in media.iterdir():
        os.utime(path, (later, later))
    moved = eval_args("", tmp_path / "data", tmp_path / "unused", "--use-cache", str(run_dir))
    with SimulatorServer(samples_of(tmp_path / "data"), BEHAVIOUR) as url:
        moved[moved.index("--api-url") + 1] = url
        proc = run_cli(moved, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    report_path = run_dir / "reports" / MODEL / "general_vqa.groundscope.json"
    summary = json.loads(report_path.read_text())["summary"]
    assert (summary["cached"], summary["changed"]) == (60, 0)
    # Different bytes are a different request: exactly the samples showing that image.
    with (media / "xray.png").open("ab") as fh:
        fh.write(b"\0" * 16)  # after the PNG's end: still the same picture, other bytes
    with_xray = {s.id for s in samples if any("xray.png" in str(m.source) for m in s.media())}
    server = SimulatorServer(samples_of(tmp_path / "data"), BEHAVIOUR)
    moved[moved.index("--api-url") + 1] = server.start()
    try:
        proc = run_cli(moved, cwd=tmp_path)
        asked = server.stats()["requests"]
    finally:
        server.stop()
    assert proc.returncode == 0, proc.stderr
    assert with_xray and asked == len(with_xray)
