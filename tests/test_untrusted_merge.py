"""`groundscope merge` reads shard run directories as untrusted input: symlinks, FIFOs,
crafted rows and configs are refused with one line naming the file (and line), before a
merged run is left behind, and nothing is read through a link
(``tests/untrusted/merge/README.txt`` lists the hostile shards)."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from cli_support import run_cli
from groundscope import run_task
from media_fixtures import image_bytes, write, write_jsonl

PRED = Path("predictions") / "m" / "general_vqa_data.jsonl"
REV = Path("reviews") / "m" / "general_vqa_data.jsonl"


@pytest.fixture(scope="module")
def shards(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("merge_hostile")
    write(base / "data", "a.jpg", image_bytes("JPEG", color="red"))
    write_jsonl(base / "data" / "data.jsonl", [
        {"id": f"q{i}", "answer": "a red square", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"Question {i}?"},
            {"type": "image_url", "image_url": {"url": "a.jpg"}}]}]} for i in range(6)])
    cfg = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"], "no_timestamp": True,
           "dataset_args": {"general_vqa": {"local_path": str(base / "data")}}}
    for k in (1, 2):
        run_task({**cfg, "work_dir": str(base / f"s{k}"), "shard": f"{k}/2"})
    return base / "s1", base / "s2"


def _first_line(path: Path) -> dict:
    return json.loads(path.read_text().splitlines()[0])


def _append(path: Path, row: object) -> None:
    with path.open("a") as fh:
        fh.write(json.dumps(row) + "\n")


def _link_folder(d: Path, other: Path) -> None:
    shutil.rmtree(d / "predictions")
    (d / "predictions").symlink_to(other / "predictions")


def _link_file(d: Path, other: Path) -> None:
    (d / PRED).unlink()
    (d / PRED).symlink_to(other / PRED)


def _fifo(d: Path, other: Path) -> None:
    (d / PRED).unlink()
    os.mkfifo(d / PRED)


def _skipped_link(d: Path, other: Path) -> None:
    secret = d.parent / "private.txt"
    secret.write_text('{"dataset": "general_vqa", "subset": "data", "problem": "secret"}\n')
    (d / "skipped.jsonl").unlink(missing_ok=True)
    (d / "skipped.jsonl").symlink_to(secret)


def _lock_link(d: Path, other: Path) -> None:
    (d / ".groundscope.lock").unlink(missing_ok=True)
    (d / ".groundscope.lock").symlink_to(d.parent / "private.txt")


def _bad_status(d: Path, other: Path) -> None:
    _append(d / PRED, {**_first_line(d / PRED), "status": "weird"})


def _list_id(d: Path, other: Path) -> None:
    _append(d / PRED, {**_first_line(d / PRED), "sample_id": ["q1"]})


def _bad_values(d: Path, other: Path) -> None:
    _append(d / REV, {**_first_line(d / REV), "values": {"bleu-1": "x"}})


def _wrong_file(d: Path, other: Path) -> None:
    _append(d / PRED, {**_first_line(d / PRED), "subset": "other"})


def _list_line(d: Path, other: Path) -> None:
    _append(d / REV, [1, 2])


def _config_edit(change: Callable[[dict], None]) -> Callable[[Path, Path], None]:
    def edit(d: Path, other: Path) -> None:
        data = json.loads((d / "config.json").read_text())
        change(data)
        (d / "config.json").write_text(json.dumps(data))
    return edit


def _torn_config(d: Path, other: Path) -> None:
    (d / "config.json").write_text('{"format": "groundscope-run", "model": ')


HOSTILE = {
    "folder_link": (_link_folder, "is a symbolic link"),
    "file_link": (_link_file, str(PRED)),
    "fifo": (_fifo, str(PRED)),
    "skipped_link": (_skipped_link, "skipped.jsonl"),
    "lock_link": (_lock_link, ".groundscope.lock"),
    "bad_status": (_bad_status, f"{PRED}:4: status"),
    "list_id": (_list_id, f"{PRED}:4: sample_id"),
    "bad_values": (_bad_values, f"{REV}:"),
    "wrong_file": (_wrong_file, f"{PRED}:4: subset: 'other'"),
    "list_line": (_list_line, "not a JSON object"),
    "shard_zero": (_config_edit(lambda c: c.update(shard="0/2")), "K counts from 1"),
    "unknown_key": (_config_edit(lambda c: c.update(evil=1)), "evil"),
    "torn_config": (_torn_config, "config.json"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_shard_refused_in_one_line(name: str, shards: tuple[Path, Path],
                                           tmp_path: Path) -> None:
    good, victim = shards
    hostile = tmp_path / "shard2"
    shutil.copytree(victim, hostile, symlinks=True)
    make, expected = HOSTILE[name]
    make(hostile, good)
    out = tmp_path / "merged"
    done = run_cli("merge", str(good), str(hostile), "--work-dir", str(out), cwd=tmp_path)
    err = done.stderr
    assert done.returncode == 2, (done.returncode, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert expected in err, err
    assert "secret" not in done.stdout + err
    assert not out.exists() or not any(out.iterdir())  # no half-merged run left behind
