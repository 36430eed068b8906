"""``--executor ray`` on a local Ray (2 CPUs, one session for the module): the same numbers
and rows as a local run, one in-flight limit across workers, a 429's pause for every worker,
a killed worker or driver losing nothing and repeating only what was in flight."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")

from aiohttp import web

from groundscope import run_task
from groundscope.simulator import SimBehaviour, SimulatorServer
from ray_support import (
    HoldingSimulator,
    actor_pid,
    process_gone,
    run_actors,
    start_local_ray,
    wait_until,
)
from reliability_support import (
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

# a local Ray per module, runs of seconds: CI runs them in its Ray step (-o addopts=-q)
pytestmark = pytest.mark.slow

BEHAVIOUR = SimBehaviour(accuracy=0.7, seed=5, latency_ms=15)
BATCH = 3
KEY_VAR, KEY = "GS_RAY_TEST_KEY", "sk-ray-test-5f1c9e2b7a"
RAY_TEMP: list[str] = []


@pytest.fixture(scope="module")
def ray_address(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    import tempfile

    temp = tempfile.mkdtemp(prefix="gs-ray-t-")  # short: Ray's Unix socket paths
    os.environ[KEY_VAR] = KEY  # before Ray starts: its workers inherit it, as on a real node
    RAY_TEMP.append(temp)
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
        server = SimulatorServer(samples, BEHAVIOUR)
        url = server.start()
        try:
            run_task(task(url, data, work, api_key=f"${KEY_VAR}", **extra))
            out[f"{name}-auth"] = {r["auth_sha256"] for r in server.requests()}
        finally:
            server.stop()
        out[name] = work
    return out


def test_ray_run_reports_and_rows_equal_a_local_run(two_runs: dict[str, Path]) -> None:
    local, ray_run = two_runs["local"], two_runs["ray"]
    assert report_numbers(ray_run) == report_numbers(local)
    assert row_set(ray_run, "predictions") == row_set(local, "predictions")
    assert row_set(ray_run, "reviews") == row_set(local, "reviews")
    assert len(rows(ray_run, "predictions")) == 60


def test_workers_resolve_the_key_name_and_the_value_never_reaches_ray(
        two_runs: dict[str, Any], ray_address: str) -> None:
    assert two_runs["ray-auth"] == two_runs["local-auth"] != {None}  # the key, sent by workers
    temp = Path(RAY_TEMP[0])  # Ray's session: logs, spilled objects, sockets
    leaked = [p for p in temp.rglob("*") if p.is_file() and KEY.encode() in p.read_bytes()]
    assert leaked == []
    config = json.loads((two_runs["ray"] / "config.json").read_text())
    assert config["api_key"] == f"${KEY_VAR}"


def test_a_key_name_unset_on_the_workers_is_one_line(ray_address: str, data: Path,
                                                     tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                     ) -> None:
    from groundscope.errors import GroundscopeError

    monkeypatch.setenv("GS_LATE_KEY", "sk-late-0000")  # here only: Ray's workers started before
    with pytest.raises(GroundscopeError) as err, SimulatorServer() as url:  # (reachable)
        run_task(task(url, data, tmp_path / "run", executor="ray", workers=2,
                      api_key="$GS_LATE_KEY"))
    text = str(err.value)
    assert "\n" not in text and "GS_LATE_KEY is not set" in text and text.startswith("worker w")


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


def _kill_workers_as_they_start(monkeypatch: pytest.MonkeyPatch, *wids: str) -> None:
    """Kill the named workers once made and before their start() is asked (the driver makes
    the reply registry in between)."""
    import ray

    from groundscope.scaleout import driver

    made = driver.RayDriver._start_registry

    async def and_kill(self: Any, *args: Any) -> None:
        await made(self, *args)
        for wid in wids:
            ray.kill(self._workers[wid], no_restart=True)

    monkeypatch.setattr(driver.RayDriver, "_start_registry", and_kill)


def test_a_worker_that_dies_as_it_starts_loses_nothing(
        ray_address: str, data: Path, samples: list, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Its part goes to the other worker (it was a RayActorError out of the run, exit 1
    with a traceback and no row)."""
    _kill_workers_as_they_start(monkeypatch, "w0")
    with SimulatorServer(samples, BEHAVIOUR) as url:
        report = run_task(task(url, data, tmp_path / "run", executor="ray", workers=2))
    assert_exactly_once(tmp_path / "run", {s.id for s in samples})
    log = "".join(p.read_text() for p in (Path(report.run_dir) / "logs").glob("*.log"))
    assert "Ray worker w0 died" in log and "Ray: 1 worker," in log


def test_every_worker_dying_as_it_starts_is_one_line(
        ray_address: str, data: Path, samples: list, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    from groundscope.errors import GroundscopeError

    _kill_workers_as_they_start(monkeypatch, "w0", "w1")
    with pytest.raises(GroundscopeError) as err, SimulatorServer(samples, BEHAVIOUR) as url:
        run_task(task(url, data, tmp_path / "run", executor="ray", workers=2))
    text = str(err.value)
    assert "\n" not in text and "every Ray worker died as it started" in text


def _run_in_thread(cfg: dict[str, Any]) -> tuple[threading.Thread, dict[str, Any]]:
    result: dict[str, Any] = {}

    def target() -> None:
        try:
            result["report"] = run_task(cfg)
        except BaseException as exc:  # shown by the test
            result["error"] = exc

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    return thread, result


def test_a_killed_worker_loses_nothing_and_resends_only_its_in_flight_requests(
        ray_address: str, data: Path, samples: list, tmp_path: Path) -> None:
    import ray

    run_dir = tmp_path / "run"
    server = HoldingSimulator(samples, BEHAVIOUR, open_for=20)
    url = server.start()
    try:
        thread, result = _run_in_thread(task(url, data, run_dir, executor="ray", workers=2))
        # the run is stuck with BATCH requests held (the gate lets no more out): kill the
        # worker holding the most of them
        wait_until("requests held", lambda: (len(server.held_now()) == BATCH and
                   len(rows(run_dir, "predictions")) == 20) or "error" in result)
        assert "error" not in result, result
        gate = next(iter(run_actors("gate").values()))
        leases = ray.get(gate.snapshot.remote())["leases"]
        victim, in_flight = max(leases.items(), key=lambda kv: kv[1])
        workers = run_actors("worker")
        name = next(n for n in workers if n.endswith(f"-worker-{victim[1:]}"))
        pid = actor_pid(workers[name])
        ray.kill(workers[name], no_restart=True)
        # its leases are handed back on the gate, and its process is gone (the kill is
        # asynchronous) before the held requests are answered
        wait_until("leases released",
                   lambda: victim not in ray.get(gate.snapshot.remote())["leases"], timeout=60)
        wait_until("the victim's process ends", lambda: process_gone(pid))
        server.open()
        thread.join(timeout=300)
        assert not thread.is_alive()
    finally:
        server.stop()
    assert "error" not in result, result
    assert_exactly_once(run_dir, {s.id for s in samples})
    resent = len(server.arrivals) - len(samples)
    assert in_flight >= 1 and resent == in_flight  # only what the dead worker had in flight
    again = [h for h, n in Counter(server.arrivals).items() if n > 1]
    assert len(again) == in_flight


class PausingSimulator(SimulatorServer):
    """Answers request number ``at`` with a 429 and ``Retry-After: <pause>``; records each
    chat request's arrival time."""

    def __init__(self, *args: Any, at: int, pause: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.at, self.pause = at, pause
        self.arrived: list[float] = []
        self.limited_at: float | None = None

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.arrived.append(time.monotonic())
        if len(self.arrived) == self.at:
            self.limited_at = time.monotonic()
            return web.json_response({"error": {"message": "slow down", "type": "requests",
                                                "code": "rate_limit_exceeded"}},
                                     status=429, headers={"Retry-After": f"{self.pause:g}"})
        return await super()._chat(request)


def test_a_429_with_retry_after_pauses_every_worker(ray_address: str, data: Path, samples: list,
                                                    tmp_path: Path) -> None:
    pause = 1.5  # 48 requests after the 429, 3 at a time, 150 ms each: 2.4 s without a pause
    server = PausingSimulator(samples, SimBehaviour(accuracy=0.7, seed=5, latency_ms=150), at=12,
                              pause=pause)
    url = server.start()
    try:
        run_task(task(url, data, tmp_path / "run", executor="ray", workers=2))
    finally:
        server.stop()
    assert server.limited_at is not None
    assert_exactly_once(tmp_path / "run", {s.id for s in samples})
    # requests already let through when the 429 reached the gate may land just after it;
    # after that, none from any worker until the pause is over
    settled = server.limited_at + 0.5
    during = [t for t in server.arrived if settled < t < server.limited_at + pause]
    assert during == []
    assert len([t for t in server.arrived if t >= server.limited_at + pause]) > 10  # went on


class ArrivalSimulator(SimulatorServer):
    """Records each chat request's arrival time."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.arrived: list[float] = []

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        self.arrived.append(time.monotonic())
        return await super()._chat(request)


def test_rpm_holds_across_workers_as_in_one_process(ray_address: str, data: Path,
                                                      samples: list, tmp_path: Path) -> None:
    """A provider at 600 rpm with one second's requests left (as mid-minute), --rpm 600 and
    2 workers: the workers share one request bucket, so the 60 requests take >= 5 s, the
    provider answers (almost) no 429, and summary.rate_limits names the endpoint."""
    rpm = 600
    server = ArrivalSimulator(samples, SimBehaviour(accuracy=0.7, seed=5, latency_ms=15,
                                                    rpm=rpm))
    url = server.start()
    assert server.limits.requests is not None
    server.limits.requests.level = rpm / 60  # what a provider has left a second into a busy minute
    try:
        report = run_task(task(url, data, tmp_path / "run", executor="ray", workers=2, rpm=rpm))
        stats = server.stats()
    finally:
        server.stop()
    assert_exactly_once(tmp_path / "run", {s.id for s in samples})
    refused = sum(stats["rate_limited"].values())
    assert refused <= 2
    span = server.arrived[-1] - server.arrived[0]
    assert span >= (len(server.arrived) - rpm / 60) / (rpm / 60) - 0.5  # paced, across workers
    figures = report.dataset("general_vqa").summary.rate_limits
    assert set(figures) == {"model"} and figures["model"].rate_limited == refused
    assert figures["model"].lowest_limit >= 1


def test_a_killed_driver_resumes_on_ray_and_repeats_no_finished_sample(
        ray_address: str, data: Path, samples: list, tmp_path: Path) -> None:
    from reliability_support import GatedSimulator

    run_dir = tmp_path / "run"
    n = 23
    server = GatedSimulator(samples, BEHAVIOUR, open_for=n)
    url = server.start()
    try:
        proc = popen_cli(eval_args(url, data, run_dir, "--eval-batch-size", str(BATCH),
                                   "--executor", "ray", "--ray-address", ray_address,
                                   "--workers", "2", "--ignore-errors"), cwd=tmp_path)
        try:
            wait_until("predictions", lambda: len(rows(run_dir, "predictions")) >= n
                       or proc.poll() is not None)
            assert proc.poll() is None, proc.communicate()
            proc.send_signal(signal.SIGKILL)
            proc.communicate(timeout=60)
        finally:
            proc.kill()
    finally:
        server.stop()
    assert proc.returncode == -signal.SIGKILL
    before = {r["sample_id"] for r in rows(run_dir, "predictions")}
    assert len(before) == n
    server = SimulatorServer(samples, BEHAVIOUR)
    url = server.start()
    try:
        run_task(task(url, data, tmp_path / "unused", executor="ray", workers=2,
                      use_cache=str(run_dir)))
        asked = [request_sample_id(r, question_ids(samples)) for r in server.requests()]
    finally:
        server.stop()
    assert not set(asked) & before, "a finished sample was requested again"
    assert sorted(asked) == sorted({s.id for s in samples} - before)
    assert_exactly_once(run_dir, {s.id for s in samples})


GROUNDING = Path(__file__).resolve().parents[1] / "examples" / "grounding"


def test_a_grounding_run_with_a_killed_worker_repeats_no_judge_call_of_finished_samples(
        ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo's model and judge requests (16 + 52) go to one simulator that answers the
    first 30 and holds every later one; a worker is killed while requests are held. Only held
    requests (in flight at the kill) may be sent twice: none of the 30 answered is asked
    again, the scored samples are not re-scored, and every sample ends with one answer."""
    import ray
    import yaml

    import groundscope.simulator.launch

    made: list[HoldingSimulator] = []

    class Held(HoldingSimulator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, open_for=30, **kwargs)
            made.append(self)

    # the run's own mock simulator is made in simulator/launch.py (start_run_simulator)
    monkeypatch.setattr(groundscope.simulator.launch, "SimulatorServer", Held)
    cfg = yaml.safe_load((GROUNDING.parent / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(GROUNDING)
    cfg["simulator"]["truth"] = str(GROUNDING / "truth.json")
    run_dir = tmp_path / "run"
    cfg.update(work_dir=str(run_dir), no_timestamp=True, executor="ray", workers=2,
               eval_batch_size=2, judge_concurrency=2)
    thread, result = _run_in_thread(cfg)

    def in_flight() -> dict[str, int]:
        total: Counter[str] = Counter()
        for gate in run_actors("gate").values():
            total.update(ray.get(gate.snapshot.remote())["leases"])
        return dict(total)

    def delivered() -> int:  # answers the driver has: predictions and judge replies on disk
        return len(rows_of(run_dir, "predictions")) + len(rows_of(run_dir, "cache"))

    def stuck() -> bool:  # every lease's request is held and every answer delivered
        return (bool(made) and 0 < len(made[0].held_now()) == sum(in_flight().values())
                and delivered() == 30)

    wait_until("requests held", lambda: "error" in result or stuck())
    assert "error" not in result, result
    server = made[0]
    # A worker may still send a request between this check and the kill (it was busy with a
    # reply it had just received): that one is held too, so "held" is what the server ever
    # held, not a snapshot taken before the kill.
    answered = set(server.arrivals[:30])
    finished = Counter((r["subset"], r["sample_id"], r["scorer"]) for r in rows_of(run_dir, "reviews"))
    victim = max(in_flight().items(), key=lambda kv: kv[1])[0]
    name = next(n for n in run_actors("worker") if n.endswith(f"-worker-{victim[1:]}"))
    worker = run_actors("worker")[name]
    pid = actor_pid(worker)
    ray.kill(worker, no_restart=True)
    # The kill is asynchronous: opening before the victim's process is gone would let it ask
    # more (answered, but its replies lost), which a later worker rightly asks again.
    wait_until("the victim's process ends", lambda: process_gone(pid))
    server.open()
    thread.join(timeout=300)
    assert not thread.is_alive() and "error" not in result, result
    held = set(server.ever_held)
    twice = {h for h, n in Counter(server.arrivals).items() if n > 1}
    assert held and twice <= held  # only what was in flight at the kill is asked again
    assert not twice & answered  # no answered model or judge call repeated
    assert len(server.arrivals) <= 68 + len(held)
    assert len({r["sample_id"] for r in rows_of(run_dir, "predictions")}) == 16
    assert finished  # the kill came after some samples were fully scored
    scored = Counter((r["subset"], r["sample_id"], r["scorer"]) for r in rows_of(run_dir, "reviews"))
    assert all(scored[key] == n for key, n in finished.items())  # none scored again


def rows_of(run_dir: Path, kind: str) -> list[dict[str, Any]]:
    from reliability_support import complete_lines

    return [r for p in sorted((run_dir / kind).rglob("*.jsonl")) for r in complete_lines(p)]


def _grounding_cfg(run_dir: Path, **extra: Any) -> dict[str, Any]:
    import yaml

    cfg = yaml.safe_load((GROUNDING.parent / "grounding_demo.yaml").read_text())
    cfg["dataset_args"]["general_vqa"]["local_path"] = str(GROUNDING)
    cfg["simulator"]["truth"] = str(GROUNDING / "truth.json")
    cfg.update(work_dir=str(run_dir), no_timestamp=True, eval_batch_size=2, judge_concurrency=2,
               **extra)
    return cfg


def _counted_run(monkeypatch: pytest.MonkeyPatch, cfg: dict[str, Any]) -> list[str]:
    """Run ``cfg`` against its own simulator; the hash of each request it received."""
    import groundscope.simulator.launch

    made: list[HoldingSimulator] = []

    class Counted(HoldingSimulator):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, open_for=10**9, **kwargs)
            made.append(self)

    monkeypatch.setattr(groundscope.simulator.launch, "SimulatorServer", Counted)
    run_task(cfg)
    return [h for server in made for h in server.arrivals]


def cache_rows(run_dir: Path) -> dict[str, set[str]]:
    return {p.name: {json.dumps(r, sort_keys=True) for r in rows_of(p.parent, p.stem)}
            for p in sorted((run_dir / "cache").glob("*.jsonl"))}


def usage_of(run_dir: Path) -> Any:
    (report,) = (run_dir / "reports").glob("*/general_vqa.groundscope.json")
    return json.loads(report.read_text())["summary"]["usage"]


def test_a_ray_grounding_run_asks_each_judge_request_once_like_a_local_run(
        ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The demo repeats judge requests across records and subsets (a claim about one image in
    answers of different records): 2 workers ask each once, as one process does."""
    local = _counted_run(monkeypatch, _grounding_cfg(tmp_path / "local"))
    ray_run = _counted_run(monkeypatch, _grounding_cfg(tmp_path / "ray", executor="ray",
                                                       workers=2))
    assert len(ray_run) == len(local) == len(set(local))  # 16 answers + 52 distinct judge calls
    assert Counter(ray_run) == Counter(local)
    assert cache_rows(tmp_path / "ray") == cache_rows(tmp_path / "local") != {}
    assert usage_of(tmp_path / "ray") == usage_of(tmp_path / "local")


def test_a_resumed_ray_grounding_run_reuses_the_runs_judge_replies(
        ray_address: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Predictions kept, reviews lost (a crash before scoring): on Ray, as locally, every
    judge reply comes from the run's cache and nothing is asked again."""
    import shutil

    run_dir = tmp_path / "run"
    assert len(_counted_run(monkeypatch, _grounding_cfg(run_dir))) == 68
    reviews = cache_rows(run_dir), {json.dumps(r, sort_keys=True) for r in rows_of(run_dir, "reviews")}
    shutil.rmtree(run_dir / "reviews")
    asked = _counted_run(monkeypatch, _grounding_cfg(tmp_path / "unused", executor="ray",
                                                     workers=2, use_cache=str(run_dir)))
    assert asked == []
    assert len(rows_of(run_dir, "reviews")) == len(reviews[1])
    assert cache_rows(run_dir) == reviews[0]


def test_ray_workers_send_videos_as_frames_as_a_local_run_does(ray_address: str,
                                                                tmp_path: Path) -> None:
    """The run's media settings are in force in the workers: with ``video_frames`` a video
    reaches the wire as its frames, in order (as in a local run), never as the video."""
    pytest.importorskip("av")
    import base64
    import io

    from PIL import Image

    from media_fixtures import write_jsonl
    from video_fixtures import COLOURS, clip_bytes

    data = tmp_path / "data"
    data.mkdir()
    records = []
    for name, colours in (("fwd", COLOURS), ("rev", COLOURS[::-1])):
        (data / f"{name}.mp4").write_bytes(clip_bytes(colours))
        records.append({"id": name, "messages": [{"role": "user", "content":
                        f"Clip {name}: <video 1> What colours?"}],
                        "video_1": f"{name}.mp4", "answer": "colours"})
    write_jsonl(data / "clips.jsonl", records)
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": {"general_vqa": {"local_path": str(data),
                                                   "subset_list": ["clips"]}},
                  "work_dir": str(tmp_path / "out"), "video_frames": len(COLOURS),
                  "executor": "ray", "workers": 2})
        bodies = server.bodies()
    finally:
        server.stop()

    def colour(part: dict[str, Any]) -> tuple[int, ...]:
        raw = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
        px = Image.open(io.BytesIO(raw)).convert("RGB").getpixel((8, 8))
        return tuple(255 if c > 127 else 0 for c in px)

    for name, colours in (("fwd", COLOURS), ("rev", COLOURS[::-1])):
        (body,) = [b for b in bodies if f"Clip {name}:" in json.dumps(b)]
        parts = [p for m in body["messages"] if isinstance(m["content"], list)
                 for p in m["content"]]
        assert [p["type"] for p in parts] == ["text"] + ["image_url"] * len(COLOURS) + ["text"]
        assert [colour(p) for p in parts[1:-1]] == colours
