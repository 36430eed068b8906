"""``--executor ray`` on a local Ray (2 CPUs, one session for the module): the same numbers
and rows as a local run, one in-flight limit across workers, a 429's pause for every worker,
a killed worker or driver losing nothing and repeating only what was in flight."""

from __future__ import annotations

import json
import signal
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from aiohttp import web  # noqa: E402

from groundscope import run_task  # noqa: E402
from groundscope.simulator import SimBehaviour, SimulatorServer  # noqa: E402
from ray_support import HoldingSimulator, run_actors, start_local_ray, wait_until  # noqa: E402
from reliability_support import (  # noqa: E402
    MODEL,
    assert_exactly_once,
    dataset_args,
    eval_args,
    popen_cli,
    question_ids,
    report_numbers,
    request_sample_id,
    rows,
    samples_of,
    write_dataset,
)

BEHAVIOUR = SimBehaviour(accuracy=0.7, seed=5, latency_ms=15)
BATCH = 3


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import tempfile

    temp = tempfile.mkdtemp(prefix="gs-ray-t-")  # short: Ray's Unix socket paths
    yield from start_local_ray(temp)


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("raydata"))


@pytest.fixture(scope="module")
def samples(data: Path) -> list:
    return samples_of(data)


def task(url: str, data: Path, work: Path, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "api_url": url, "datasets": ["general_vqa"], "ignore_errors": True,
            "dataset_args": dataset_args(data), "work_dir": str(work), "no_timestamp": True,
            "eval_batch_size": BATCH, **extra}


def row_set(run_dir: Path, kind: str) -> set[str]:
    drop = {"latency_s", "attempts"}
    return {json.dumps({k: v for k, v in r.items() if k not in drop}, sort_keys=True)
            for r in rows(run_dir, kind)}


@pytest.fixture(scope="module")
def two_runs(ray_address: str, data: Path, samples: list,
             tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The same task run locally and on 2 Ray workers, each against its own simulator."""
    out: dict[str, Any] = {}
    for name, extra in (("local", {}), ("ray", {"executor": "ray", "workers": 2})):
        work = tmp_path_factory.mktemp(name) / "run"
        with SimulatorServer(samples, BEHAVIOUR) as url:
            run_task(task(url, data, work, **extra))
        out[name] = work
    return out


def test_ray_run_reports_and_rows_equal_a_local_run(two_runs: dict[str, Path]) -> None:
    local, ray_run = two_runs["local"], two_runs["ray"]
    assert report_numbers(ray_run) == report_numbers(local)
    assert row_set(ray_run, "predictions") == row_set(local, "predictions")
    assert row_set(ray_run, "reviews") == row_set(local, "reviews")
    assert len(rows(ray_run, "predictions")) == 60


def test_peak_in_flight_never_exceeds_the_batch_size_across_workers(
        ray_address: str, data: Path, samples: list, tmp_path: Path) -> None:
    server = SimulatorServer(samples, SimBehaviour(accuracy=0.7, seed=5, latency_ms=40))
    url = server.start()
    try:
        run_task(task(url, data, tmp_path / "run", executor="ray", workers=2))
        stats = server.stats()
    finally:
        server.stop()
    assert stats["requests"] == 60
    assert stats["peak_in_flight"] == BATCH  # reached, never passed (2 workers x 3 would be 6)
