"""The parts of ``--executor ray`` that need no Ray: the endpoint gate's state
(``GateKeeper``), the config shipped to workers (keys as ``$NAME`` only), the one-line error
without Ray, Ray's temp dir."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from groundscope.cli import main
from groundscope.config import load_config
from groundscope.errors import ConfigError
from groundscope.scaleout import session, shipping
from groundscope.scaleout.gatekeeper import GateKeeper, WorkerGone, pause_of
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


async def test_a_429_retry_after_pauses_every_acquire() -> None:
    gate = GateKeeper(4)
    lease = await gate.acquire("w0")
    await gate.release(lease, 429, {"retry-after": "30"})
    blocked = asyncio.create_task(gate.acquire("w1"))
    await asyncio.sleep(0.05)
    assert not blocked.done()  # a free slot, but the endpoint asked everyone to wait
    blocked.cancel()
    snap = await gate.snapshot()
    assert (snap["rate_limited"], snap["pauses"], snap["in_flight"]) == (1, 1, 0)
    assert pause_of({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert pause_of({"retry-after": "soon"}) is None


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
    assert err.count("\n") == 0 and "pip install 'groundscope[ray]'" in err
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
