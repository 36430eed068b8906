"""The run directory: appended lines survive crashes, resume keys, compaction."""

from pathlib import Path

from groundscope.jsonl import read_jsonl
from groundscope.store import RunStore, sample_from_json
from groundscope.types import (
    Completion,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Prediction,
    PredictionStatus,
    Sample,
    Score,
    ScoreStatus,
    TextPart,
)


def make_sample(i: int, tmp: Path) -> Sample:
    img = MediaRef(Modality.IMAGE, "../media/dog.jpg", base_dir=tmp)
    msg = Message("user", (TextPart(f"question {i}"), MediaPart(img)))
    return Sample(id=f"s{i}", dataset="general_vqa", subset="sub", messages=(msg,),
                  origin=Origin(tmp / "d.jsonl", i), target=("Dog",), question=f"question {i}")


def pred(i: int, text: str = "Dog") -> Prediction:
    return Prediction(f"s{i}", f"h{i}", PredictionStatus.OK, Completion(text, model="m"))


def test_append_and_read_back(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "org/model:v1")
    for i in range(3):
        store.append_prediction("general_vqa", "sub", make_sample(i, tmp_path), pred(i))
    store.close()
    path = store.predictions_file("general_vqa", "sub")
    assert path.parent.name == "org_model_v1"
    rows = list(read_jsonl(path))
    assert [r["sample_id"] for r in rows] == ["s0", "s1", "s2"]
    assert rows[0]["sample"]["messages"][0]["content"][1] == {"type": "image", "media": "../media/dog.jpg"}
    back = sample_from_json(rows[1], "general_vqa", "sub")
    assert back.target == ("Dog",) and back.question == "question 1"


def test_torn_tail_is_ignored_and_repaired(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "m", no_timestamp=True)
    store.write_config({})  # what makes it a run directory that --use-cache may open
    store.append_prediction("d", "s", make_sample(0, tmp_path), pred(0))
    store.close()
    path = store.predictions_file("d", "s")
    with path.open("ab") as fh:
        fh.write(b'{"sample_id": "s1", "rep')  # a crash mid-write
    assert list(store.load_predictions("d", "s")) == [("s0", 0)]
    again = RunStore.open(tmp_path, "m")
    again.append_prediction("d", "s", make_sample(1, tmp_path), pred(1))
    again.close()
    assert [r["sample_id"] for r in read_jsonl(path)] == ["s0", "s1"]


def test_superseded_lines_are_compacted_on_close(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "m")
    store.append_prediction("d", "s", make_sample(0, tmp_path), pred(0, "first"))
    store.append_prediction("d", "s", make_sample(1, tmp_path), pred(1))
    store.append_prediction("d", "s", make_sample(0, tmp_path), pred(0, "second"))
    store.close()
    rows = list(read_jsonl(store.predictions_file("d", "s")))
    assert [(r["sample_id"], r["prediction"]) for r in rows] == [("s1", "Dog"), ("s0", "second")]


def test_reviews_keyed_by_scorer(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path, "m")
    for scorer in ("bleu", "rouge"):
        store.append_score("d", "s", Score("s0", scorer, ScoreStatus.OK, {"x": 1.0}), "h0")
    store.close()
    assert set(store.load_reviews("d", "s")) == {("s0", 0, "bleu"), ("s0", 0, "rouge")}


def test_timestamped_run_dirs_never_collide(tmp_path: Path) -> None:
    a = RunStore.create(tmp_path, "m")
    b = RunStore.create(tmp_path, "m")
    assert a.run_dir != b.run_dir


def test_a_run_directory_is_locked_while_in_use(tmp_path: Path) -> None:
    """Another process cannot open a run directory in use; stores of one process share it."""
    import os
    import subprocess
    import sys

    import pytest

    from groundscope.errors import StoreError
    from groundscope.runlock import LOCK_FILE

    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys; from groundscope.store import RunStore; "
         f"s = RunStore.create({str(tmp_path)!r}, 'm', no_timestamp=True); print('locked', flush=True); "
         "sys.stdin.read()"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(StoreError, match=rf"in use by another groundscope process \(pid {holder.pid}\)"):
            RunStore.open(tmp_path, "m")
    finally:
        holder.communicate("")  # it exits: the system drops its lock
    first = RunStore.open(tmp_path, "m")
    assert (tmp_path / LOCK_FILE).read_text().strip() == str(os.getpid())
    second = RunStore.open(tmp_path, "m")  # same process: shared
    first.unlock()
    second.unlock()
    probe = subprocess.run([sys.executable, "-c", "from groundscope.store import RunStore; "
                            f"RunStore.open({str(tmp_path)!r}, 'm')"], capture_output=True, text=True)
    assert probe.returncode == 0, probe.stderr  # released by both
