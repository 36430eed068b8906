"""`eval --shard K/N` + `groundscope merge`: N shards of a run, merged, give the run directory a
single run of the same config gives (reports equal, prediction and review sets equal), with
limit, shuffle, repeats, paraphrase groups, bad records and duplicate ids; merge refuses
what is not the shards of one finished run with one line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli_support import run_cli
from groundscope import merge_runs, run_task
from groundscope.errors import ConfigError, StoreError
from groundscope.rescore import rebuild_report
from groundscope.sharding import Dealer, parse_shard
from media_fixtures import image_bytes, write, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
VOLATILE = {"latency_s", "attempts"}  # timings: differ between any two runs


def _row_key(row: dict[str, Any]) -> dict[str, Any]:
    """A row without timings; a review's judge usage (``{step: {model: {"billed": counts,
    "cached": counts}}}``) as the requests asked, billed and cached together: a reply one
    process serves from its cache may be billed by another shard."""
    out = {k: v for k, v in row.items() if k not in VOLATILE}
    if "scorer" in row and isinstance(out.get("usage"), dict):
        out["usage"] = {(step, model): sum(c.get(kind, {}).get("requests", 0)
                                           for kind in ("billed", "cached"))
                        for step, models in out["usage"].items()
                        for model, c in models.items()}
    return out


def _vqa(root: Path) -> Path:
    """Two subsets: answered records, a paraphrase record, an explicit group spread over
    records, bad records (no messages, a missing image) and a duplicate id."""
    write(root, "a.jpg", image_bytes("JPEG", color="red"))
    write(root, "b.png", image_bytes("PNG", color="blue"))

    def rec(i: int, **extra: Any) -> dict[str, Any]:
        return {"id": f"q{i}", "answer": ["a red square", "a blue square"][i % 2],
                "messages": [{"role": "user", "content": [
                    {"type": "text", "text": f"Question {i}: what is shown?"},
                    {"type": "image_url", "image_url": {"url": ["a.jpg", "b.png"][i % 2]}}]}],
                **extra}

    first = [rec(i) for i in range(14)]
    first[3] = {"id": "q3", "answer": "x"}  # bad: no messages
    first[5] = rec(5, paraphrases=["Name the colour of the shape.", "What colour is it?"])
    first[7] = rec(1)  # duplicate id q1: skipped, as the single run skips it
    for i in (8, 10, 12):
        first[i] = rec(i, group="shared")
    second = [rec(100 + i) for i in range(9)]
    second[4]["messages"][0]["content"][1]["image_url"]["url"] = "missing.png"  # bad
    write_jsonl(root / "alpha.jsonl", first)
    write_jsonl(root / "beta.jsonl", second)
    return root


def _config(data: Path, work: Path, **extra: Any) -> dict[str, Any]:
    return {"model": "sim-model", "eval_type": "mock", "datasets": ["general_vqa"],
            "dataset_args": {"general_vqa": {"local_path": str(data), "shuffle": True,
                                             "metric_list": ["bleu", "rouge", "consistency"]}},
            "limit": 11, "repeats": 2, "seed": 7, "work_dir": str(work), "no_timestamp": True,
            "simulator": {"accuracy": 0.6}, "ignore_errors": True,
            "judge": {"models": {"model_id": "j", "api_url": "mock"}}, **extra}


def _rows(run_dir: Path, kind: str) -> dict[tuple[Any, ...], dict[str, Any]]:
    out = {}
    for path in (run_dir / kind).rglob("*.jsonl"):
        for line in path.read_text().splitlines():
            row = _row_key(json.loads(line))
            out[(path.name, row["sample_id"], row["repeat"], row.get("scorer"))] = row
    return out


def _reports(run_dir: Path) -> dict[str, Any]:
    return {p.name: json.loads(p.read_text()) for p in (run_dir / "reports").rglob("*.json")}


def _skipped(run_dir: Path) -> list[str]:
    path = run_dir / "skipped.jsonl"
    return sorted(path.read_text().splitlines()) if path.exists() else []


def _shards(cfg: dict[str, Any], base: Path, n: int) -> list[Path]:
    dirs = []
    for k in range(1, n + 1):
        run_task({**cfg, "work_dir": str(base / f"shard{k}"), "shard": f"{k}/{n}"})
        dirs.append(base / f"shard{k}")
    return dirs


def _asked(usage: dict[str, Any]) -> dict[str, int]:
    """Requests per step, billed and cached together: what the run asked for."""
    return {step: sum(c["billed"]["requests"] + c["cached"]["requests"] for c in models.values())
            for step, models in usage["steps"].items()}


def _without_usage(reports: dict[str, Any]) -> tuple[dict[str, Any], list[dict[str, int]]]:
    """The reports with ``summary.usage`` taken out, and what each asked. Shards keep their
    own response caches, so a judge reply one process would have served from its cache may
    be billed by another shard: billed vs cached may differ, their sum may not."""
    asked = []
    for report in reports.values():
        usage = report.get("summary", {}).pop("usage", None)
        if usage is not None:
            asked.append(_asked(usage))
    return reports, asked


def _assert_same_run(single: Path, merged: Path) -> None:
    assert _without_usage(_reports(merged)) == _without_usage(_reports(single))
    assert _rows(merged, "predictions") == _rows(single, "predictions")
    assert _rows(merged, "reviews") == _rows(single, "reviews")
    assert _skipped(merged) == _skipped(single)
    assert (merged / "report.html").is_file()


@pytest.fixture(scope="module")
def vqa_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path, list[Path]]:
    base = tmp_path_factory.mktemp("shard_vqa")
    cfg = _config(_vqa(base / "data"), base / "single")
    run_task(cfg)
    return cfg, base / "single", _shards(cfg, base, 3)


def test_three_shards_merged_equal_the_single_run(vqa_run, tmp_path: Path) -> None:
    _, single, shards = vqa_run
    report = merge_runs(shards, tmp_path / "merged")
    merged = Path(report.run_dir)
    _assert_same_run(single, merged)
    summary = report.dataset("general_vqa").summary
    assert summary.skipped == 3 and summary.requested > 0  # bad records and the duplicate, once
    assert sum(len(_skipped(d)) for d in shards) == 3  # each written by one shard only
    # each shard asked a real part, and no sample twice
    parts = [set(k[:3] for k in _rows(d, "predictions")) for d in shards]
    assert all(parts) and sum(map(len, parts)) == len(set().union(*parts))
    config = json.loads((merged / "config.json").read_text())
    assert config["shard"] is None and config["format"] == "groundscope-run"


def test_a_group_spread_over_records_is_scored_whole_by_one_shard(vqa_run) -> None:
    _, _, shards = vqa_run
    holders = [d for d in shards
               if any(k[1] == "group:shared" for k in _rows(d, "reviews"))]
    assert len(holders) == 1


def test_merge_cli_order_of_arguments_does_not_matter(vqa_run, tmp_path: Path) -> None:
    _, single, shards = vqa_run
    done = run_cli("merge", *map(str, reversed(shards)), "--work-dir", str(tmp_path / "m"),
                   cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    (merged,) = (tmp_path / "m").iterdir()
    _assert_same_run(single, merged)
    assert f"Merged 3 shards into {merged}" in out


@pytest.fixture(scope="module")
def grounding_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    base = tmp_path_factory.mktemp("shard_grounding")
    cfg = yaml.safe_load((ROOT / "examples" / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(ROOT / "examples" / "grounding")
    cfg["simulator"]["truth"] = str(ROOT / "examples" / "grounding" / "truth.json")
    cfg.update(work_dir=str(base / "single"), no_timestamp=True)
    run_task(cfg)
    return cfg, base / "single"


def test_grounding_judge_run_merged_equals_the_single_run(grounding_run, tmp_path: Path) -> None:
    cfg, single = grounding_run
    report = merge_runs(_shards(cfg, tmp_path, 2), tmp_path / "merged")
    _assert_same_run(single, Path(report.run_dir))
    assert report.dataset("general_vqa").extra  # judge / grounding figures are there


def test_report_rebuild_keeps_the_planned_subset_order(grounding_run, tmp_path: Path) -> None:
    """subset_list [scenes, questions]: `groundscope report` (and so merge) lists them as
    eval did, not by name."""
    _, single = grounding_run
    copy = tmp_path / "copy"
    shutil.copytree(single, copy)
    rebuild_report(copy)
    assert _reports(copy) == _reports(single)


# ------------------------------------------------------------------ refusals, one line


def _refused(args: list[str]) -> str:
    done = run_cli("merge", *args, cwd=Path(args[-1]).parent)
    err = done.stderr
    assert done.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err


def test_missing_shard_refused_unless_partial(vqa_run, tmp_path: Path) -> None:
    _, _, shards = vqa_run
    err = _refused([str(shards[0]), str(shards[2]), "--work-dir", str(tmp_path / "m")])
    assert "shard 2/3 missing" in err and "--partial" in err
    assert not (tmp_path / "m").exists() or not any((tmp_path / "m").iterdir())
    report = merge_runs([shards[0], shards[2]], tmp_path / "p", partial=True)
    warnings = report.dataset("general_vqa").summary.warnings
    assert any("shard 2/3 missing" in w for w in warnings)


def test_duplicate_shard_refused(vqa_run, tmp_path: Path) -> None:
    _, _, shards = vqa_run
    copy = tmp_path / "copy"
    shutil.copytree(shards[1], copy)
    err = _refused([*map(str, shards), str(copy), "--work-dir", str(tmp_path / "m")])
    assert "shard 2/3 given twice" in err and str(copy) in err


def test_mismatched_shards_refused(vqa_run, tmp_path: Path) -> None:
    cfg, _, shards = vqa_run
    other = tmp_path / "other"
    run_task({**cfg, "seed": 8, "work_dir": str(other), "shard": "2/3"})
    err = _refused([str(shards[0]), str(other), str(shards[2]), "--work-dir", str(tmp_path / "m")])
    assert f"{other}: not a shard of the same run" in err and "seed" in err
    four = tmp_path / "four"
    run_task({**cfg, "work_dir": str(four), "shard": "2/4"})
    err = _refused([str(shards[0]), str(four), "--work-dir", str(tmp_path / "m")])
    assert "not parts of one split" in err
    err = _refused([str(shards[0]), str(vqa_run[1]), "--work-dir", str(tmp_path / "m")])
    assert "not a shard" in err


def test_unfinished_shard_refused(vqa_run, tmp_path: Path) -> None:
    _, _, shards = vqa_run
    killed = tmp_path / "killed"
    shutil.copytree(shards[1], killed)
    shutil.rmtree(killed / "reports")  # reports are written when a run ends
    err = _refused([str(shards[0]), str(killed), str(shards[2]), "--work-dir", str(tmp_path / "m")])
    assert "did not finish" in err and "--use-cache" in err


def test_overlapping_shards_with_different_answers_refused(vqa_run, tmp_path: Path) -> None:
    _, _, shards = vqa_run
    evil = tmp_path / "evil"
    shutil.copytree(shards[1], evil)
    (victim,) = [p for p in (shards[0] / "predictions").rglob("*.jsonl") if "alpha" in p.name]
    row = json.loads(victim.read_text().splitlines()[0])
    row["prediction"] = "something else"
    target = evil / victim.relative_to(shards[0])
    with target.open("a") as fh:
        fh.write(json.dumps(row) + "\n")
    out = tmp_path / "m"
    err = _refused([str(shards[0]), str(evil), str(shards[2]), "--work-dir", str(out)])
    assert "the shards overlap" in err and str(shards[0]) in err
    assert not out.exists() or not any(out.iterdir())  # nothing half-merged is left


# ------------------------------------------------------------------ K/N


@pytest.mark.parametrize(("text", "expected"), [("1/1", (1, 1)), (" 3 / 4 ", (3, 4))])
def test_shard_parsed(text: str, expected: tuple[int, int]) -> None:
    assert parse_shard(text) == expected


@pytest.mark.parametrize(("text", "why"), [
    ("0/3", "K counts from 1"), ("4/3", "K must be in 1..3"), ("1/0", "N must be in"),
    ("2", "expected K/N"), ("a/b", "expected K/N"), ("-1/3", "expected K/N"),
    ("1/1000000", "N must be in")])
def test_bad_shard_is_one_line_exit_2_before_any_request(text: str, why: str,
                                                          tmp_path: Path) -> None:
    done = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa",
                   "--dataset-args", json.dumps({"general_vqa": {
                       "local_path": str(ROOT / "examples" / "vqa")}}),
                   "--work-dir", str(tmp_path / "out"), f"--shard={text}", cwd=tmp_path)
    err = done.stderr
    assert done.returncode == 2 and why in err and "shard" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
    with pytest.raises(ConfigError):
        from groundscope.config import load_config

        load_config({"datasets": ["general_vqa"], "eval_type": "mock", "shard": text})


def test_dealer_deals_round_robin_and_keeps_groups_together() -> None:
    d = Dealer(1, 2)
    owned = [d.owns(("ds", "s", line), group) for line, group in
             [(1, None), (1, None), (2, "g"), (3, None), (4, "g"), (5, None), (6, None)]]
    # records 1 -> 1, 2 (group g) -> 2, 3 -> 1, 4 (g again) -> 2, 5 -> 2, 6 -> 1
    assert owned == [True, True, False, True, False, False, True]


def test_merge_needs_a_run_directory(tmp_path: Path) -> None:
    with pytest.raises(StoreError, match="not a directory"):
        merge_runs([tmp_path / "nope"], tmp_path / "m")


def test_resumed_shards_and_more_shards_than_records(tmp_path: Path) -> None:
    """The Kubernetes recipe: each shard runs with --use-cache on its (empty) directory and
    is resumed the same way; with more shards than records, a shard dealt nothing ends
    normally, and the merge still equals the single run."""
    data = tmp_path / "data"
    write(data, "a.jpg", image_bytes("JPEG", color="red"))
    write_jsonl(data / "d.jsonl", [
        {"id": f"q{i}", "answer": "a red square", "messages": [{"role": "user", "content": [
            {"type": "text", "text": f"Question {i}?"},
            {"type": "image_url", "image_url": {"url": "a.jpg"}}]}]} for i in range(2)])
    cfg = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(data)}},
           "work_dir": str(tmp_path / "single"), "no_timestamp": True}
    run_task(cfg)
    dirs = []
    for k in (1, 2, 3):
        shard = tmp_path / f"shard-{k}"
        shard.mkdir()
        for _ in range(2):  # started, then resumed (a retried pod)
            run_task({**cfg, "use_cache": str(shard), "shard": f"{k}/3"})
        dirs.append(shard)
    assert not _rows(dirs[2], "predictions")  # dealt nothing, ended normally
    report = merge_runs(dirs, tmp_path / "merged")
    _assert_same_run(tmp_path / "single", Path(report.run_dir))


def test_a_shard_is_resumed_as_the_same_shard(vqa_run, tmp_path: Path) -> None:
    cfg, single, shards = vqa_run
    copy = tmp_path / "copy"
    shutil.copytree(shards[0], copy)
    before = _rows(copy, "predictions")
    for shard, why in [("2/3", "is shard 1/3; resume it as that, not --shard 2/3"),
                       (None, "is shard 1/3; resume it as that, not without --shard")]:
        with pytest.raises(ConfigError, match=why):
            run_task({**cfg, "use_cache": str(copy), "shard": shard})
    with pytest.raises(ConfigError, match="is a whole run"):
        run_task({**cfg, "use_cache": str(single), "shard": "1/3"})
    assert _rows(copy, "predictions") == before
    assert json.loads((copy / "config.json").read_text())["shard"] == "1/3"


def test_shards_an_earlier_version_ran_are_named_and_resuming_them_mends_the_plans(
        vqa_run, tmp_path: Path) -> None:
    """Versions to 2026-12-06 hashed local media with BLAKE2b (SHA-256 since) and wrote no
    ``media_ids`` in ``plan.json``: merge names every such shard in one line and says how to
    mend it; resumed by this version each asks nothing again, records its plan anew and
    merges."""
    from groundscope import media

    cfg, single, shards = vqa_run
    earlier = [tmp_path / "earlier1", tmp_path / "earlier2"]
    for k, shard in enumerate(earlier, 1):
        with media.earlier_content_ids():  # as that version hashed media
            run_task({**cfg, "work_dir": str(shard), "shard": f"{k}/3"})
        plan = json.loads((shard / "plan.json").read_text())
        del plan["media_ids"]  # as that version wrote it
        (shard / "plan.json").write_text(json.dumps(plan))
    err = _refused([*map(str, earlier), str(shards[2]), "--work-dir", str(tmp_path / "m")])
    assert ("2 shards identified media by another hash than this version's (sha256; a "
            "groundscope before 2026-12-06 used BLAKE2b): resume each with this version") in err
    for k, shard in enumerate(earlier, 1):
        assert f"{k}/3 ({shard}): groundscope eval ... --shard {k}/3 --use-cache {shard}" in err
    plan = json.loads((earlier[1] / "plan.json").read_text())
    (earlier[1] / "plan.json").write_text(json.dumps({**plan, "media_ids": "md5"}))
    err = _refused([*map(str, earlier), str(shards[2]), "--work-dir", str(tmp_path / "m")])
    assert f"2/3 ({earlier[1]}, media ids 'md5')" in err
    err = _refused([*map(str, earlier), "--partial", "--work-dir", str(tmp_path / "m")])
    assert "2 shards identified media by another hash" in err  # no shard of this version's
    # a shard of this version's whose plan differs is a real difference, not the hash's:
    # the earlier one whose plan agrees with shard 1/3's is not blamed
    agreeing = tmp_path / "agreeing"
    shutil.copytree(shards[1], agreeing)
    plan = json.loads((agreeing / "plan.json").read_text())
    del plan["media_ids"]
    (agreeing / "plan.json").write_text(json.dumps(plan))
    differing = tmp_path / "differing"
    shutil.copytree(shards[2], differing)
    plan = json.loads((differing / "plan.json").read_text())
    (differing / "plan.json").write_text(json.dumps({**plan, "digest": "0" * 32}))
    err = _refused([str(shards[0]), str(agreeing), str(differing), "--work-dir",
                    str(tmp_path / "m")])
    assert "identified media" not in err and "ran on different data" in err
    for k, shard in enumerate(earlier, 1):
        saved = {p: p.read_bytes() for p in (shard / "predictions").rglob("*.jsonl")}
        run_task({**cfg, "use_cache": str(shard), "shard": f"{k}/3"})
        assert {p: p.read_bytes() for p in saved} == saved  # nothing asked again
    merged = Path(merge_runs([*earlier, shards[2]], tmp_path / "merged").run_dir)
    assert _without_usage(_reports(merged)) == _without_usage(_reports(single))

    def unhashed(run_dir: Path, kind: str) -> dict[tuple[Any, ...], dict[str, Any]]:
        # the reused rows keep the request hashes their version computed
        return {k: {**row, "request_hash": None} for k, row in _rows(run_dir, kind).items()}

    for kind in ("predictions", "reviews"):
        assert unhashed(merged, kind) == unhashed(single, kind)


def test_shards_of_two_versions_without_local_media_merge(tmp_path: Path) -> None:
    """With no local medium, a plan is the same whichever hash a version used for media: a
    shard whose plan an earlier version wrote (no ``media_ids``) merges as before."""
    data = tmp_path / "data"
    write_jsonl(data / "d.jsonl", [{"id": f"q{i}", "answer": "four", "messages": [
        {"role": "user", "content": f"What is 2+{i}?"}]}
                                   for i in range(4)])
    cfg = {"model": "m", "eval_type": "mock", "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(data)}}, "no_timestamp": True}
    dirs = [tmp_path / "s1", tmp_path / "s2"]
    for k, shard in enumerate(dirs, 1):
        run_task({**cfg, "work_dir": str(shard), "shard": f"{k}/2"})
    plan = json.loads((dirs[0] / "plan.json").read_text())
    del plan["media_ids"]
    (dirs[0] / "plan.json").write_text(json.dumps(plan))
    report = merge_runs(dirs, tmp_path / "merged")
    assert sum(d.summary.succeeded for d in report.datasets) == 4
