"""groundscope.dataset.discover: local_path + subset -> the file to read."""

from __future__ import annotations

from pathlib import Path

import pytest

from groundscope.dataset.discover import candidates, find_subset_file, list_subsets
from groundscope.errors import DatasetError


def touch(directory: Path, *names: str) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text("")


def test_split_file_wins_over_plain_file(tmp_path: Path) -> None:
    touch(tmp_path, "example.jsonl", "example_test.jsonl")
    assert find_subset_file(tmp_path, "example", "test") == tmp_path / "example_test.jsonl"
    assert find_subset_file(tmp_path, "example", "val") == tmp_path / "example.jsonl"


def test_extension_order_jsonl_csv_tsv_parquet(tmp_path: Path) -> None:
    touch(tmp_path, "s.parquet", "s.tsv", "s.csv")
    assert find_subset_file(tmp_path, "s", "test").name == "s.csv"
    (tmp_path / "s.csv").unlink()
    assert find_subset_file(tmp_path, "s", "test").name == "s.tsv"
    (tmp_path / "s.tsv").unlink()
    assert find_subset_file(tmp_path, "s", "test").name == "s.parquet"
    touch(tmp_path, "s.jsonl")
    assert find_subset_file(tmp_path, "s", "test").name == "s.jsonl"


def test_extension_is_the_outer_loop_like_evalscope(tmp_path: Path) -> None:
    # EvalScope tries {subset}_{split}.ext then {subset}.ext for each ext in turn
    touch(tmp_path, "s.csv", "s_test.tsv")
    assert find_subset_file(tmp_path, "s", "test").name == "s.csv"
    assert [p.name for p in candidates(tmp_path, "s", "test")] == [
        "s_test.jsonl", "s.jsonl", "s_test.csv", "s.csv",
        "s_test.tsv", "s.tsv", "s_test.parquet", "s.parquet",
    ]  # fmt: skip


def test_a_file_local_path_serves_every_subset(tmp_path: Path) -> None:
    touch(tmp_path, "data.tsv")
    for subset in ("a", "b", "default"):
        assert find_subset_file(tmp_path / "data.tsv", subset, "test") == tmp_path / "data.tsv"


def test_unsupported_single_file(tmp_path: Path) -> None:
    touch(tmp_path, "data.json")
    with pytest.raises(DatasetError, match="unsupported dataset file type"):
        find_subset_file(tmp_path / "data.json", "x", "test")


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        find_subset_file(tmp_path / "nope", "x", "test")
    with pytest.raises(DatasetError, match="does not exist"):
        list_subsets(tmp_path / "nope")


def test_nothing_found_lists_expected_and_present(tmp_path: Path) -> None:
    touch(tmp_path, "other.jsonl", "notes.txt", "mcq_val.tsv")
    with pytest.raises(DatasetError) as info:
        find_subset_file(tmp_path, "example", "test")
    message = str(info.value)
    assert "'example'" in message and str(tmp_path) in message
    for expected in ("example_test.jsonl", "example.jsonl", "example_test.parquet", "example.tsv"):
        assert expected in message
    assert "found mcq_val.tsv, other.jsonl" in message
    assert "notes.txt" not in message


def test_nothing_found_in_an_empty_directory(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="found no dataset files"):
        find_subset_file(tmp_path, "example", "test")


def test_list_subsets_strips_split_dedupes_and_sorts(tmp_path: Path) -> None:
    touch(tmp_path, "b_test.jsonl", "b.tsv", "a.csv", "c_val.parquet", "readme.md", "_test.jsonl")
    assert list_subsets(tmp_path) == ["_test", "a", "b", "c_val"]
    assert list_subsets(tmp_path, split="val") == ["_test", "a", "b", "b_test", "c"]


def test_list_subsets_of_a_file(tmp_path: Path) -> None:
    touch(tmp_path, "example_test.jsonl")
    assert list_subsets(tmp_path / "example_test.jsonl") == ["example"]
