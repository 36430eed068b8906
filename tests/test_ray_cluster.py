"""``--executor ray`` on a 2-node Ray cluster on this machine (``ray.cluster_utils.Cluster``:
a head and a second node, one CPU each, so the 2 workers run one per node): the run gives the
numbers and rows of a single process, and losing the second node mid-run loses nothing and
asks nothing again for a sample finished before the loss (the simulator's own request log
says so)."""

from __future__ import annotations

import contextlib
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from groundscope import run_task
from groundscope.simulator import SimBehaviour, SimulatorServer
from ray_support import RAY_ENV, HoldingSimulator, wait_until
from reliability_support import (
    MODEL,
    assert_exactly_once,
    dataset_args,
    question_ids,
    report_numbers,
    request_sample_id,
    rows,
    samples_of,
    write_dataset,
)
from test_ray_scaleout import _run_in_thread, row_set

BEHAVIOUR = SimBehaviour(accuracy=0.7, seed=5, latency_ms=15)
BATCH = 3
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    import os
    import shutil

    os.environ.update(RAY_ENV)
    import ray
    from ray.cluster_utils import Cluster

    # Ray's temp dir (short: its Unix socket paths) and its ray_current_cluster file, which
    # Cluster writes: this test's own, so no other Ray on this machine finds this cluster
    temp = tempfile.mkdtemp(prefix="gs-rc-")
    saved = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = temp
    os.mkdir(os.path.join(temp, "ray"))
    fast = {"health_check_period_ms": 500, "health_check_failure_threshold": 3}
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "include_dashboard": False, "_system_config": fast})
    cluster.add_node(num_cpus=1)
    ray.init(address=cluster.address, log_to_driver=False, namespace="groundscope-tests")
    cluster.wait_for_nodes()
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()
        shutil.rmtree(temp, ignore_errors=True)
        if saved is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = saved


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("clusterdata"))


def task(url: str, data: Path, work: Path, **extra: Any) -> dict[str, Any]:
    return {"model": MODEL, "api_url": url, "datasets": ["general_vqa"], "ignore_errors": True,
            "dataset_args": dataset_args(data), "work_dir": str(work), "no_timestamp": True,
            "eval_batch_size": BATCH, **extra}


def test_a_run_over_two_nodes_gives_the_single_process_numbers(cluster: Any, data: Path,
                                                               tmp_path: Path) -> None:
    import ray

    assert len([n for n in ray.nodes() if n["Alive"]]) == 2
    out = {}
    for name, extra in (("local", {}), ("ray", {"executor": "ray", "workers": 2})):
        server = SimulatorServer(samples_of(data), BEHAVIOUR)
        url = server.start()
        try:
            run_task(task(url, data, tmp_path / name, **extra))
            out[name] = server.stats()
        finally:
            server.stop()
    assert report_numbers(tmp_path / "ray") == report_numbers(tmp_path / "local")
    assert row_set(tmp_path / "ray", "predictions") == row_set(tmp_path / "local", "predictions")
    assert row_set(tmp_path / "ray", "reviews") == row_set(tmp_path / "local", "reviews")
    assert out["ray"]["requests"] == out["local"]["requests"] == 60
    assert out["ray"]["peak_in_flight"] <= BATCH  # one limit across the two nodes


def test_losing_a_node_mid_run_loses_nothing_and_repeats_no_finished_request(
        cluster: Any, data: Path, tmp_path: Path) -> None:
    import psutil  # Ray's own copy, on the path once ray is imported

    samples = samples_of(data)
    run_dir = tmp_path / "run"
    server = HoldingSimulator(samples, BEHAVIOUR, open_for=20)
    url = server.start()
    try:
        thread, result = _run_in_thread(task(url, data, run_dir, executor="ray", workers=2))
        wait_until("requests held", lambda: (len(server.held_now()) == BATCH and
                   len(rows(run_dir, "predictions")) == 20) or "error" in result)
        assert "error" not in result, result
        finished = {r["sample_id"] for r in rows(run_dir, "predictions")}  # in the run dir
        (second,) = [n for n in cluster.worker_nodes]  # not the head (the driver's node)
        raylet = second.all_processes["raylet"][0].process
        doomed = psutil.Process(raylet.pid).children(recursive=True)  # its workers too
        cluster.remove_node(second, allow_graceful=False)  # as a machine lost: all at once
        for proc in doomed:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        server.open()
        thread.join(timeout=300)
        assert not thread.is_alive()
    finally:
        server.stop()
    assert "error" not in result, result
    said = "".join(p.read_text() for p in run_dir.rglob("*.log"))  # the run's log
    assert "Ray worker w1 died;" in said or "Ray worker w0 died;" in said  # the node's worker
    assert_exactly_once(run_dir, {s.id for s in samples})
    asked = Counter(request_sample_id(r, question_ids(samples)) for r in server.requests())
    assert len(finished) == 20 and not {i for i, n in asked.items() if n > 1} & finished
    assert set(asked) == {s.id for s in samples}
    # what may be asked again: samples unfinished at the loss whose requests the lost node
    # had sent (in flight, or answered to a node that was gone before it could pass it on)
