"""The run directory: appended lines survive crashes, resume keys, compaction."""

import json
import math
import re
from pathlib import Path

import pytest

from groundscope.errors import StoreError
from groundscope.jsonl import read_jsonl
from groundscope.rowcodec import prediction_from_json, sample_from_json, score_from_json
from groundscope.rows import read_rows
from groundscope.store import RunStore
from groundscope.types import (
    MAX_TOKEN_COUNT,
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
    Usage,
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


def test_every_row_kind_written_is_read_back_equal(tmp_path: Path) -> None:
    """Each file kind's row goes through the model that reads it: what was appended comes
    back from ``read_rows`` as the same values."""
    store = RunStore.create(tmp_path, "m", no_timestamp=True)
    usage = Usage(MAX_TOKEN_COUNT, 7, MAX_TOKEN_COUNT, reasoning_tokens=3, cached_tokens=5)
    p = Prediction("s0", "h0", PredictionStatus.OK, Completion("Dog", "m", "stop", usage, "r"),
                   attempts=2, latency_s=0.25)
    failed = Prediction("s1", "h1", PredictionStatus.ERROR, error="boom", error_kind="timeout")
    score = Score("s0", "acc", ScoreStatus.OK, {"accuracy": 1.0}, "A", {"why": ["x"]},
                  weights={"accuracy": 2.0},
                  usage={"claims": {"j": {"billed": {"requests": 1, "prompt_tokens": 9}}}})
    store.append_prediction("d", "s", make_sample(0, tmp_path), p)
    store.append_prediction("d", "s", make_sample(1, tmp_path), failed)
    store.append_score("d", "s", score, "h0")
    store.append_skipped("d", "s", "line 3: bad")
    store.close()
    preds = list(read_rows(store.predictions_file("d", "s"), "prediction"))
    assert [prediction_from_json(r) for r in preds] == [p, failed]
    back = score_from_json(next(read_rows(store.reviews_file("d", "s"), "review")))
    assert (back.values, back.weights, back.extracted, back.usage) == (
        score.values, score.weights, score.extracted, score.usage)
    assert list(read_rows(tmp_path / "skipped.jsonl", "skipped")) == [
        {"dataset": "d", "subset": "s", "problem": "line 3: bad"}]


def test_a_row_it_could_not_read_is_never_written(tmp_path: Path) -> None:
    """A score that is not a finite number (NaN is written as JSON null) is refused at the
    write, naming the field, and the file stays readable, rather than written and then
    refused by every later ``report`` / ``--use-cache``."""
    store = RunStore.create(tmp_path, "m", no_timestamp=True)
    store.append_score("d", "s", Score("s0", "acc", ScoreStatus.OK, {"accuracy": 1.0}), "h0")
    for values, weights in (({"accuracy": math.nan}, {}), ({"f1": 0.5}, {"f1": math.inf})):
        refused = r"d_s.jsonl: refusing to write a row it could not read: (values|weights)"
        with pytest.raises(StoreError, match=refused):
            store.append_score("d", "s", Score("s1", "acc", ScoreStatus.OK, values,
                                               weights=weights), "h1")
    store.close()
    assert [r["sample_id"] for r in read_rows(store.reviews_file("d", "s"), "review")] == ["s0"]


@pytest.mark.parametrize("latency", ["Infinity", "NaN", "-inf", -5.0, "-0.5"])
def test_a_latency_that_is_no_duration_is_one_line_naming_its_row(
        tmp_path: Path, latency: object) -> None:
    """A prediction row's ``latency_s`` must be a finite number of seconds, not negative:
    the string "Infinity" passed as a number, and the page then failed to draw (``report``
    said ``cannot convert float NaN to integer`` and wrote no page). A number given as a
    string, as before, still reads."""
    store = RunStore.create(tmp_path, "m", no_timestamp=True)
    p = Prediction("s0", "h0", PredictionStatus.OK, Completion("Dog", "m", "stop"), latency_s=0.5)
    store.append_prediction("d", "s", make_sample(0, tmp_path), p)
    store.append_prediction("d", "s", make_sample(1, tmp_path), p)
    store.close()
    path = store.predictions_file("d", "s")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["latency_s"] = "1.5"
    rows[1]["latency_s"] = latency
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(StoreError, match=rf"^{re.escape(str(path))}:2: latency_s: "):
        list(read_rows(path, "prediction"))
    assert next(read_rows(path, "prediction"))["latency_s"] == "1.5"
