"""The parts of ``--executor ray`` that need no Ray: the endpoint gate's state
(``GateKeeper``: the local run's rate limiter, shared by workers; time is a fake clock), the
config shipped to workers (keys as ``$NAME`` only), the one-line error
without Ray, Ray's temp dir."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from groundscope.cli import main
from groundscope.client.gate import GateStats, Outcome
from groundscope.config import load_config
from groundscope.errors import ConfigError
from groundscope.live import LiveView
from groundscope.scaleout import session, shipping
from groundscope.scaleout import worker as worker_module
from groundscope.scaleout.gatekeeper import GateKeeper, RemoteGate, WorkerGone
from groundscope.scaleout.worker import DONE, PREDICTION, SCORE, Event, SampleWorker, Task, gate_limits
from groundscope.scoring import ScoringContext
from groundscope.simulator import SimulatorServer
from reliability_support import eval_args, samples_of, write_dataset


async def test_the_limit_holds_across_workers_and_a_dead_workers_leases_come_back() -> None:
    gate = GateKeeper(2)
    a1 = await gate.acquire("w0")
    await gate.acquire("w0")
    waiting = asyncio.create_task(gate.acquire("w1"))
    await asyncio.sleep(0)
    assert not waiting.done()  # w0 holds both slots
    assert await gate.release_worker("w0") == 2
    await asyncio.wait_for(waiting, 5)
    assert (await gate.snapshot())["leases"] == {"w1": 1}
    await gate.release(a1)  # a dead worker's late release changes nothing
    assert (await gate.snapshot())["in_flight"] == 1
    with pytest.raises(WorkerGone):
        await gate.acquire("w0")


async def test_a_dead_workers_waiter_passes_its_wake_up_on() -> None:
    """A slot freed while a dead worker waits first in line still reaches the live one."""
    gate = GateKeeper(1)
    held = await gate.acquire("w1")
    dead = asyncio.create_task(gate.acquire("w0"))
    await asyncio.sleep(0)
    live = asyncio.create_task(gate.acquire("w1"))
    await asyncio.sleep(0)
    await gate.release_worker("w0")  # w0 held nothing; its waiter is still queued
    await gate.release(held)
    await asyncio.wait_for(live, 5)
    with pytest.raises(WorkerGone):
        await dead


class FakeClock:
    """Monotonic time moved only by ``sleep`` (each sleeper wakes at its own deadline)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        deadline = self.now + seconds
        await asyncio.sleep(0)
        self.now = max(self.now, deadline)


def keeper(limit: int, clock: FakeClock, **limits: float) -> GateKeeper:
    return GateKeeper(limit, clock=clock, wall=clock, sleep=clock.sleep, **limits)


async def test_a_429_retry_after_pauses_every_acquire() -> None:
    clock = FakeClock()
    gate = keeper(4, clock)
    lease = await gate.acquire("w0")
    await gate.release(lease, 429, {"retry-after": "30"})
    await gate.release(await gate.acquire("w1"), 200)  # a free slot, but everyone waited
    assert clock.now == 1030.0
    snap = await gate.snapshot()
    assert (snap["rate_limited"], snap["paused_s"], snap["in_flight"]) == (1, 30.0, 0)


async def test_rpm_holds_across_two_workers() -> None:
    clock = FakeClock()
    gate = keeper(8, clock, rpm=60)  # one a second, a burst of one
    admitted: list[float] = []

    async def worker(name: str) -> None:
        for _ in range(6):
            lease = await gate.acquire(name, 10)
            admitted.append(clock.now)
            await gate.release(lease, 200)

    await asyncio.gather(worker("w0"), worker("w1"))
    assert admitted == [1000.0 + i for i in range(12)]  # one a second, whoever asks


async def test_x_ratelimit_reset_requests_pauses_every_worker() -> None:
    clock = FakeClock()
    gate = keeper(8, clock)
    first, other = await gate.acquire("w0"), await gate.acquire("w1")
    await gate.release(first, 429, {"x-ratelimit-reset-requests": "7s",
                                    "x-ratelimit-remaining-requests": "0"})
    await gate.release(other, 200)
    for worker in ("w1", "w0"):  # neither the worker that got the 429 nor the other goes early
        await gate.release(await gate.acquire(worker), 200)
        assert clock.now == 1007.0
    assert gate.stats.paused_s == 7.0


async def test_a_429_lowers_the_limit_for_every_worker() -> None:
    """AIMD across workers: a 429 of w1's (no retry hint, sent with 10 in flight) cuts the
    shared limit to 7, so w1 waits until fewer than 7 are in flight, whoever holds them."""
    gate = GateKeeper(10)
    held = {w: [await gate.acquire(w) for _ in range(5)] for w in ("w0", "w1")}
    await gate.release(held["w1"].pop(), 429, {})
    assert gate.stats.limit == 7 and gate.stats.lowest_limit == 7
    await gate.release(held["w0"].pop(), 200)  # 8 in flight
    waiting = asyncio.create_task(gate.acquire("w1"))
    for _ in range(2):  # 8, then 7 in flight: over the cut limit
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done()
        await gate.release(held["w0"].pop(), 200)
    await asyncio.wait_for(waiting, 5)  # 6 in flight: under it
    assert gate.stats.rate_limited == 1 and gate.stats.in_flight == 7


class _Method:
    def __init__(self, fn: object) -> None:
        self.remote = fn


class FakeActor:
    """A GateKeeper called as a Ray actor handle is (``handle.method.remote(...)``)."""

    def __init__(self, keeper: GateKeeper) -> None:
        for name in ("acquire", "release", "gate_stats"):
            setattr(self, name, _Method(getattr(keeper, name)))


async def test_the_drivers_view_shows_the_endpoint_across_workers() -> None:
    """Each worker's retries and 429s reach the actor; the driver's view reads them all."""
    clock = FakeClock()
    actor = FakeActor(keeper(4, clock))
    w0, w1, view = (RemoteGate(actor, w, 4) for w in ("w0", "w1", "driver"))
    w0.stats.retries += 2  # as the client counts them
    await w0.release(await w0.acquire(5), _outcome(429))
    await w1.release(await w1.acquire(5), _outcome(200))
    held = await w1.acquire(5)
    await view.refresh()
    assert isinstance(view.stats, GateStats)
    assert (view.stats.retries, view.stats.rate_limited, view.stats.in_flight) == (2, 1, 1)
    assert view.stats.lowest_limit == 1  # 1 in flight refused: a concurrency limit
    await w1.release(held, _outcome(200))


async def test_the_live_view_of_a_ray_run_shows_the_gate_actors() -> None:
    """A Ray run's driver has no client: the live view reads its views of the gate actors."""
    actors = {"model": FakeActor(GateKeeper(4)), "judge:j": FakeActor(GateKeeper(3))}
    workers = {n: RemoteGate(a, "w0", 4) for n, a in actors.items()}
    held = await workers["model"].acquire(5)
    await workers["judge:j"].release(await workers["judge:j"].acquire(5), _outcome(429))
    views = {n: RemoteGate(a, "driver", 0) for n, a in actors.items()}
    for view in views.values():
        await view.refresh()
    live = LiveView([], ScoringContext(gates=dict(views)), {})
    assert "in flight 1/4, judges 0/1 | retries 0, 429s 1" in live.status()
    await workers["model"].release(held, _outcome(200))


def _outcome(status: int) -> Outcome:
    return Outcome(status, {})


def test_gates_are_named_and_limited_as_a_local_runs() -> None:
    cfg = load_config(_cfg(rpm=120, tpm=9000, eval_batch_size=6, judge_concurrency=3, judge={
        "models": [{"model_id": "j1", "api_url": "http://127.0.0.1:9/v1", "rpm": 30},
                   {"model_id": "j2", "api_url": "http://127.0.0.1:9/v1", "tpm": 500}]}))
    specs = {s.name: (s.limit, s.rpm, s.tpm) for s in gate_limits(cfg).values()}
    assert specs == {"model": (6, 120, 9000), "judge:j1": (3, 30, None),
                     "judge:j2": (3, None, 500)}


def test_every_gate_caps_a_pause_as_a_local_run_does() -> None:
    # a local run caps a judge endpoint's pause at retry_max_delay, as the model's
    # (JudgePanel's gate: ScoringContext.retry_max_delay); the Ray gates capped a judge's
    # at 30 s whatever the setting (found by an outside attack, 2026-12-06)
    cfg = load_config(_cfg(retry_max_delay=7, judge={
        "models": [{"model_id": "j1", "api_url": "http://127.0.0.1:9/v1"}]}))
    local = ScoringContext.from_config(cfg).retry_max_delay
    assert {s.name: s.max_pause for s in gate_limits(cfg).values()} == {
        "model": cfg.retry_max_delay, "judge:j1": local}


def _cfg(**extra: object) -> dict:
    return {"datasets": ["general_vqa"], "api_url": "http://127.0.0.1:9/v1",
            "dataset_args": {"general_vqa": {"local_path": "."}}, **extra}


def test_shipped_config_carries_key_names_never_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GS_TEST_KEY", "sk-live-123456789")
    monkeypatch.setenv("GS_JUDGE_KEY", "sk-judge-987654321")
    cfg = load_config(_cfg(api_key="$GS_TEST_KEY", judge={"models": [
        {"model_id": "j", "api_url": "http://127.0.0.1:9/v1", "api_key": "${GS_JUDGE_KEY}"}]}))
    data = shipping.shipped_config(cfg)
    text = json.dumps(data)
    assert "sk-live" not in text and "sk-judge" not in text
    assert data["api_key"] == "$GS_TEST_KEY"
    assert data["judge"]["models"][0]["api_key"] == "${GS_JUDGE_KEY}"
    assert load_config(data).api_key.get_secret_value() == "sk-live-123456789"  # as a worker does
    assert shipping.shipped_config(load_config(_cfg(api_key="EMPTY")))["api_key"] == "EMPTY"


@pytest.mark.parametrize(("extra", "field"), [
    ({"api_key": "sk-literal-123456"}, "api_key:"),
    ({"api_url": "http://user:pw-secret@127.0.0.1:9/v1"}, "api_url:"),
    ({"judge": {"models": [{"model_id": "j", "api_url": "http://127.0.0.1:9/v1",
                            "api_key": "sk-literal-123456"}]}}, "judge.models[0].api_key:"),
    ({"generation_config": {"extra_body": {"api_key": "tok-secret-12345"}}},
     "generation_config:"),
])
def test_a_secret_given_as_a_value_is_refused_for_ray(extra: dict, field: str) -> None:
    cfg = load_config(_cfg(**extra))
    with pytest.raises(ConfigError) as err:
        shipping.shipped_config(cfg)
    assert str(err.value).startswith(field)
    assert "pw-secret" not in str(err.value) and "sk-literal" not in str(err.value)


def test_without_ray_one_line_how_to_install_exit_2_before_any_request(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path, per_subset=3)
    real = shipping.importlib.util.find_spec
    monkeypatch.setattr(shipping.importlib.util, "find_spec",
                        lambda name, *a: None if name == "ray" else real(name, *a))
    server = SimulatorServer(samples_of(data))
    url = server.start()
    try:
        code = main(eval_args(url, data, tmp_path / "run", "--executor", "ray"))
        asked = server.stats()["requests"]
    finally:
        server.stop()
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.count("\n") == 0 and "pip install -e '.[ray]' in the groundscope clone" in err
    assert asked == 0
    assert not (tmp_path / "run").exists()  # no run directory either


def test_a_literal_key_with_ray_is_one_line_exit_2(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    data = write_dataset(tmp_path, per_subset=3)
    code = main(eval_args("http://127.0.0.1:9/v1", data, tmp_path / "run", "--executor", "ray",
                          "--api-key", "sk-literal-abcdef123"))
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "$NAME" in err
    assert "sk-literal" not in err


def test_rays_temp_dir_is_in_the_work_dir_unless_too_long_for_its_sockets(tmp_path: Path) -> None:
    short, scratch = session.temp_dir_for("/w")
    assert (short, scratch) == ("/w/.ray", False)
    long_dir = tmp_path / ("d" * 80)
    path, scratch = session.temp_dir_for(long_dir)
    assert scratch and len(path) <= session.MAX_TEMP_DIR_CHARS and Path(path).is_dir()
    Path(path).rmdir()


def test_resuming_a_local_run_on_ray_is_no_config_change() -> None:
    from groundscope.resume import config_changes

    local = load_config(_cfg()).redacted()
    on_ray = load_config(_cfg(executor="ray", workers=4, ray_address="auto")).redacted()
    assert config_changes(local, on_ray) == []
    assert config_changes(local, load_config(_cfg(seed=7)).redacted()) != []


class _TickingWorker(SampleWorker):
    """A worker whose samples yield a prediction, a score and their end some event-loop
    turns apart, staggered (no client, no endpoint: only how the events go back)."""

    async def _one(self, task: Task, queue: asyncio.Queue[Event]) -> None:
        stagger = int(task.key[2]) % 37
        for kind, turns in ((PREDICTION, stagger), (SCORE, 5), (DONE, 5)):
            for _ in range(turns):
                await asyncio.sleep(0)
            queue.put_nowait((kind, task.key, None))


async def _batches(n: int) -> tuple[list[list[Event]], float]:
    worker = _TickingWorker("w0", {}, "", [], None)
    tasks = [Task(("d", "s", str(i), 0), None, None) for i in range(n)]  # type: ignore[arg-type]
    loop = asyncio.get_running_loop()
    started = loop.time()
    batches = [batch async for batch in worker.run(tasks)]
    return batches, loop.time() - started


def _in_order(batches: list[list[Event]], n: int) -> bool:
    seen: dict[str, list[str]] = {}
    for kind, key, _ in (event for batch in batches for event in batch):
        seen.setdefault(key[2], []).append(kind)
    return seen == {str(i): [PREDICTION, SCORE, DONE] for i in range(n)}


async def test_a_worker_sends_its_events_in_batches_not_one_ray_object_each() -> None:
    """Each batch is one Ray object, which costs both the worker and the driver: a worker
    sends at most one a BATCH_S (it sent one per event-loop turn that had an event: ~45 here,
    2.3 a sample in bench_ray). Every event arrives, each sample's in order."""
    batches, elapsed = await _batches(300)
    assert _in_order(batches, 300)
    assert len(batches) <= 2 + elapsed / worker_module.BATCH_S, (len(batches), elapsed)


async def test_a_batch_holds_at_most_batch_events(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(worker_module, "BATCH_EVENTS", 100)
    batches, _ = await _batches(300)
    assert _in_order(batches, 300)
    assert max(map(len, batches)) == 100 and len(batches) >= 9


async def test_a_worker_sets_its_scorers_up_in_the_background_as_it_starts(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A Ray worker builds the English tokenizer (nltk's import, ~0.3 s) in a background
    thread as it starts, as the local runner does once its first wave is out: it built it
    on its event loop at the first BLEU score, with every request of the worker waiting."""
    import threading

    from groundscope.scoring import english

    built: list[str] = []
    monkeypatch.setattr(english, "warm_up", lambda: built.append(threading.current_thread().name))
    cfg = load_config(_cfg(model="m"))
    worker = SampleWorker("w0", shipping.shipped_config(cfg), cfg.api_url, [], None)
    assert await worker.start({"model": object()}) is None
    for thread in threading.enumerate():
        if thread.name == "groundscope-warm-up":
            thread.join(10)
    await worker.close()
    assert built == ["groundscope-warm-up"]
