"""A run directory is untrusted input (someone else's, a shared results folder): ``score``,
``report`` and ``eval --use-cache`` on a crafted one send no environment secret, write nowhere
outside it, read no FIFO, device or endless line, and say what is wrong in one line.

Hostile run directories are built by the tests from a real finished run (real files,
symlinks and FIFOs); ``tests/untrusted/rundir/README.txt`` lists them.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from groundscope.simulator import JudgeResponder, SimBehaviour, SimulatorServer
from groundscope.store import REPORT_SUFFIX
from reliability_support import eval_args, run_cli, samples_of, write_dataset

SECRET = "AWSSECRET-rundir-test-987xyz"
PRED = Path("predictions") / "m" / "general_vqa_alpha.jsonl"


def _sent_as_bearer(records: list[dict], key: str) -> bool:
    digest = hashlib.sha256(f"Bearer {key}".encode()).hexdigest()[:16]
    return any(r["auth_sha256"] == digest for r in records)


def one_line_error(proc: subprocess.CompletedProcess, code: int = 2) -> str:
    assert proc.returncode == code, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("groundscope: error:")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("rundir"), per_subset=3)


@pytest.fixture(scope="module")
def sim(data: Path) -> Iterator[SimulatorServer]:
    server = SimulatorServer(samples_of(data), SimBehaviour(accuracy=0.7),
                             responders=[JudgeResponder()])
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def judged(data: Path, sim: SimulatorServer, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run with an LLM judge (its key saved as ``$GS_JUDGE_KEY``)."""
    run_dir = tmp_path_factory.mktemp("judged") / "run"
    judge = json.dumps({"strategy": "llm", "models": {
        "model_id": "judge-1", "api_url": sim.base_url, "api_key": "$GS_JUDGE_KEY"}})
    proc = run_cli(eval_args(sim.base_url, data, run_dir, "--judge", judge), cwd=run_dir.parent,
                   GS_JUDGE_KEY="sk-judge-own")
    assert proc.returncode == 0, proc.stderr
    return run_dir


def copy_run(run: Path, tmp_path: Path) -> Path:
    out = tmp_path / "run"
    shutil.copytree(run, out)
    (out / ".groundscope.lock").unlink(missing_ok=True)
    return out


def model_dir(run: Path) -> Path:
    (folder,) = (run / "predictions").iterdir()
    return folder


def first_file(folder: Path) -> Path:
    return sorted(folder.glob("*.jsonl"))[0]


# ------------------------------------------------------------------ H1: env secrets
def test_score_sends_no_env_var_a_crafted_config_names(judged: Path, sim: SimulatorServer,
                                                       tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    config = json.loads((run / "config.json").read_text())
    for m in config["judge"]["models"]:
        m["api_key"] = "$GS_ATTACK_SECRET"  # the attacker's pick of the user's variables
    (run / "config.json").write_text(json.dumps(config))
    shutil.rmtree(run / "cache", ignore_errors=True)
    sim.reset()
    proc = run_cli(["score", str(run)], cwd=tmp_path, GS_ATTACK_SECRET=SECRET)
    assert proc.returncode == 0, proc.stderr
    assert sim.requests() and not _sent_as_bearer(sim.requests(), SECRET)
    assert "--judge-key-env GS_ATTACK_SECRET" in proc.stderr  # one warning says how
    # the documented feature, now opt-in: the user names the variable
    shutil.rmtree(run / "cache", ignore_errors=True)
    sim.reset()
    proc = run_cli(["score", str(run), "--judge-key-env", "GS_ATTACK_SECRET"], cwd=tmp_path,
                   GS_ATTACK_SECRET=SECRET)
    assert proc.returncode == 0, proc.stderr
    assert _sent_as_bearer(sim.requests(), SECRET)


# ------------------------------------------------------------------ H3: the lock file
def test_a_symlinked_lock_file_is_refused_and_its_target_untouched(judged: Path,
                                                                   tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("IMPORTANT\n")
    (run / ".groundscope.lock").symlink_to(victim)
    line = one_line_error(run_cli(["report", str(run)], cwd=tmp_path))
    assert ".groundscope.lock" in line
    assert victim.read_text() == "IMPORTANT\n"


def test_a_fifo_lock_file_is_refused(judged: Path, tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    os.mkfifo(run / ".groundscope.lock")
    line = one_line_error(run_cli(["report", str(run)], cwd=tmp_path, timeout=60))
    assert "not a regular file" in line


# ------------------------------------------------------------------ H4: unbounded reads
@pytest.mark.parametrize("command", ["report", "score"])
def test_a_predictions_file_linked_to_dev_zero_is_one_line(judged: Path, tmp_path: Path,
                                                           command: str) -> None:
    run = copy_run(judged, tmp_path)
    path = first_file(model_dir(run))
    path.unlink()
    path.symlink_to("/dev/zero")
    line = one_line_error(run_cli([command, str(run)], cwd=tmp_path, timeout=60))
    assert str(path) in line and "symbolic link" in line


@pytest.mark.parametrize("where", ["predictions", "reviews", "skipped.jsonl", "config.json",
                                   "report"])
def test_a_fifo_in_a_run_directory_never_hangs(judged: Path, tmp_path: Path, where: str) -> None:
    run = copy_run(judged, tmp_path)
    if where in ("predictions", "reviews"):
        path = first_file(run / where / model_dir(run).name)
    elif where == "report":
        path = sorted((run / "reports").rglob(f"*{REPORT_SUFFIX}"))[0]
    else:
        path = run / where
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    args = ["report", str(run)]
    if where == "report":  # saved reports are read when runs are compared
        args += [str(judged), "--out", str(tmp_path / "cmp.html")]
    line = one_line_error(run_cli(args, cwd=tmp_path, timeout=60))
    assert str(path.name) in line
    assert "not a regular file" in line or "no config.json" in line


def test_an_endless_line_is_refused_at_the_cap(judged: Path, tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    path = first_file(model_dir(run))
    with path.open("ab") as fh:  # 65 MiB of one unterminated-then-terminated line
        chunk = b"x" * (1 << 20)
        for _ in range(65):
            fh.write(chunk)
        fh.write(b"\n")
    proc = run_cli(["report", str(run)], cwd=tmp_path, timeout=120)
    line = one_line_error(proc)
    assert f"{path}:" in line and "over 67108864 bytes" in line


# ------------------------------------------------------------------ M1: writes via symlinks
def _use_cache(data: Path, sim: SimulatorServer, run: Path, tmp_path: Path
               ) -> subprocess.CompletedProcess:
    return run_cli(eval_args(sim.base_url, data, tmp_path / "unused", "--use-cache", str(run)),
                   cwd=tmp_path)


def test_use_cache_never_appends_through_a_symlinked_file(judged: Path, data: Path,
                                                          sim: SimulatorServer,
                                                          tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    path = first_file(model_dir(run))
    path.unlink()
    path.symlink_to(victim)
    line = one_line_error(_use_cache(data, sim, run, tmp_path))
    assert str(path) in line and "symbolic link" in line
    assert victim.read_bytes() == b""


def test_use_cache_never_writes_into_a_symlinked_subdirectory(judged: Path, data: Path,
                                                              sim: SimulatorServer,
                                                              tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    elsewhere = tmp_path / "elsewhere"
    folder = run / "reviews" / model_dir(run).name
    shutil.move(folder, elsewhere)
    folder.symlink_to(elsewhere, target_is_directory=True)
    before = {p.name: p.read_bytes() for p in elsewhere.iterdir()}
    line = one_line_error(_use_cache(data, sim, run, tmp_path))
    assert str(folder) in line and "symbolic link" in line
    assert {p.name: p.read_bytes() for p in elsewhere.iterdir()} == before


def test_the_log_file_is_never_written_through_a_symlink(judged: Path, data: Path,
                                                         sim: SimulatorServer,
                                                         tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")
    log = run / "logs" / "eval_log.log"
    log.unlink(missing_ok=True)
    log.parent.mkdir(exist_ok=True)
    log.symlink_to(victim)
    proc = _use_cache(data, sim, run, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_bytes() == b""
    assert "eval_log.log" in proc.stderr and "log lines go to the terminal only" in proc.stderr


def test_a_planted_temporary_file_symlink_is_replaced_not_followed(judged: Path,
                                                                   tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    victim = tmp_path / "victim"
    victim.write_text("IMPORTANT\n")
    report = sorted((run / "reports").rglob("*.json"))[0]
    (report.parent / f".{report.name}.{os.getpid()}.tmp").symlink_to(victim)  # atomic_write's
    from groundscope.fileio import atomic_write

    atomic_write(report, report.read_bytes())
    assert victim.read_text() == "IMPORTANT\n"


# ------------------------------------------------------------------ H2: media roots
def _craft_media(run: Path, media: str, origin: str | None) -> None:
    """Point the first saved image part at ``media`` (and the sample's origin elsewhere)."""
    for path in sorted(model_dir(run).glob("*.jsonl")):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line]
        for row in rows:
            for msg in row["sample"]["messages"]:
                parts = msg["content"] if isinstance(msg["content"], list) else []
                for part in parts:
                    if part["type"] != "text":
                        part["media"] = media
                        if origin is not None:
                            row["sample"]["origin"] = origin
                        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
                        return
    raise AssertionError("no saved media part")


@pytest.fixture(scope="module")
def secret_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from media_fixtures import image_bytes

    folder = tmp_path_factory.mktemp("private")
    (folder / "secret.jpg").write_bytes(image_bytes(color="blue", size=(40, 30)))
    return folder


def _embedded(run: Path, cwd: Path, *extra: str) -> int:
    proc = run_cli(["report", str(run), *extra], cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return (run / "report.html").read_text().count("data:image/")


def test_a_saved_origin_never_becomes_a_media_root(judged: Path, secret_dir: Path, data: Path,
                                                   tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    before = _embedded(run, data)  # the dataset's folder is the working directory
    assert before > 0
    _craft_media(run, "secret.jpg", f"{secret_dir}/data.jsonl:1")
    assert _embedded(run, data) == before  # no blob more: the secret


def test_recorded_roots_outside_cwd_and_work_dir_are_dropped(judged: Path, secret_dir: Path,
                                                             data: Path, tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    assert _embedded(run, tmp_path) == 0  # the dataset's folder is elsewhere: not honoured
    before = _embedded(run, tmp_path, "--media-root", str(data))  # unless named now
    assert before > 0
    config = json.loads((run / "config.json").read_text())
    config["allowed_media_roots"] = [*config["allowed_media_roots"], str(secret_dir), "/"]
    (run / "config.json").write_text(json.dumps(config))
    _craft_media(run, str(secret_dir / "secret.jpg"), None)
    assert _embedded(run, tmp_path, "--media-root", str(data)) == before  # no blob more: the secret


# ------------------------------------------------------------------ M4: crafted fields
def _set(field: str, value: object):
    def change(row: dict) -> object:
        row[field] = value
        return row
    return change


def _drop(field: str):
    def change(row: dict) -> object:
        del row[field]
        return row
    return change


FUZZ = {
    "p_repeat_str": ("predictions", _set("repeat", "a"), "repeat"),
    "p_sample_none": ("predictions", _set("sample", None), "sample"),
    "p_list_line": ("predictions", lambda row: [row], "not a JSON object"),
    "p_no_sample_id": ("predictions", _drop("sample_id"), "sample_id"),
    "p_status_bad": ("predictions", _set("status", "weird"), "status"),
    "v_list_line": ("reviews", lambda row: [row], "not a JSON object"),
    "v_values_str": ("reviews", _set("values", "abc"), "values"),
    "v_value_str": ("reviews", _set("values", {"bleu-1": "x"}), "values"),
    "v_status_bad": ("reviews", _set("status", "weird"), "status"),
    "v_no_sample_id": ("reviews", _drop("sample_id"), "sample_id"),
    "v_repeat_str": ("reviews", _set("repeat", "0"), "repeat"),
}


@pytest.mark.parametrize("case", sorted(FUZZ))
@pytest.mark.parametrize("command", ["report", "score"])
def test_a_crafted_row_is_one_line_naming_file_line_field(judged: Path, tmp_path: Path,
                                                          case: str, command: str) -> None:
    kind, change, field = FUZZ[case]
    if command == "score" and kind == "reviews":
        pytest.skip("score writes new reviews; it never reads the saved ones")
    run = copy_run(judged, tmp_path)
    path = first_file(run / kind / model_dir(run).name)
    lines = path.read_text().splitlines()
    lines[1] = json.dumps(change(json.loads(lines[1])))
    path.write_text("\n".join(lines) + "\n")
    line = one_line_error(run_cli([command, str(run)], cwd=tmp_path))
    assert f"{path}:2: " in line and field in line, line


@pytest.mark.parametrize("case", sorted(c for c in FUZZ if FUZZ[c][0] == "reviews"))
def test_a_crafted_review_row_stops_a_comparison(judged: Path, tmp_path: Path, case: str) -> None:
    """``report A B`` reads every review of both runs: a crafted row is one line, never a
    count quietly short of it."""
    kind, change, field = FUZZ[case]
    first = copy_run(judged, tmp_path / "a")
    second = copy_run(judged, tmp_path / "b")
    path = first_file(second / kind / model_dir(second).name)
    lines = path.read_text().splitlines()
    lines[1] = json.dumps(change(json.loads(lines[1])))
    path.write_text("\n".join(lines) + "\n")
    line = one_line_error(run_cli(["report", str(first), str(second)], cwd=tmp_path))
    assert f"{path}:2: " in line and field in line, line


def test_a_crafted_config_dataset_args_list_is_one_line(judged: Path, tmp_path: Path) -> None:
    run = copy_run(judged, tmp_path)
    config = json.loads((run / "config.json").read_text())
    config["dataset_args"] = [1]
    (run / "config.json").write_text(json.dumps(config))
    for command in ("report", "score"):
        assert "dataset_args" in one_line_error(run_cli([command, str(run)], cwd=tmp_path))
