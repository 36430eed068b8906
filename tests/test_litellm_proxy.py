"""groundscope through a real LiteLLM proxy in front of the simulator (issue 22).

LiteLLM (``litellm[proxy]`` from the package index) is a large install of its own, so it
lives in its own virtualenv and these tests run in CI's optional gateway step
(``.ci/run``). They look for the proxy's command in ``GROUNDSCOPE_LITELLM`` (a path), else
``litellm`` on the PATH, and skip without it.

What they hold the proxy to:
- every wire format (OpenAI chat, Anthropic Messages, OpenAI Responses) gives, through the
  proxy, the answers and token usage a direct run gives: the image reached the simulator
  intact (its oracle answers from the request's text *and* media, ``--accuracy 1``), and the
  usage came back exact;
- a provider's request limit behind the proxy, which passes the provider's headers on with
  the ``llm_provider-`` prefix: the run finishes with no failed sample, waits as the hints
  say and meets the limit with its first wave only.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import EXAMPLES, ROOT, run_cli

LITELLM = os.environ.get("GROUNDSCOPE_LITELLM") or shutil.which("litellm")
pytestmark = [pytest.mark.slow, pytest.mark.skipif(
    not LITELLM, reason="no LiteLLM proxy: CI's gateway step installs litellm[proxy] in its "
    "own venv and sets GROUNDSCOPE_LITELLM")]

RPM = 120  # the limited upstream's requests a minute
KEY = "sk-gateway-test"  # the proxy's master key: the only key groundscope is given
# the bundled images (every API takes images; video and audio only OpenAI chat)
IMAGES = {"dog.jpg": "Dog", "AMNH.jpg": "Museum", "tokyo.jpg": "Tokyo", "beach.jpg": "Beach",
          "tesla.jpg": "Tesla", "xray.png": "Chest"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_listening(port: int, proc: subprocess.Popen[bytes], what: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds:.0f}s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGINT)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _dataset(folder: Path) -> str:
    """A General-VQA subset of the bundled images, one question each; its dataset_args."""
    lines = []
    for name, answer in IMAGES.items():
        shutil.copy(EXAMPLES / "media" / name, folder / name)
        lines.append(json.dumps({"messages": [{"role": "user", "content": "What is shown?<image 1>"}],
                                 "image_1": name, "answer": answer}))
    (folder / "images.jsonl").write_text("\n".join(lines) + "\n")
    return json.dumps({"general_vqa": {"local_path": str(folder), "subset_list": ["images"]}})


def _simulator(port: int, args: str, *extra: str) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "groundscope", "simulate", "--port", str(port), "--datasets",
         "general_vqa", "--dataset-args", args, "--accuracy", "1", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _wait_listening(port, proc, "the simulator", 60)
    return proc


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Two simulators (one unlimited, one at 60 requests a minute) and a LiteLLM proxy
    routing three model names to them."""
    tmp = tmp_path_factory.mktemp("litellm")
    free, limited, proxy_port = _free_port(), _free_port(), _free_port()
    args = _dataset(tmp)
    sims = [_simulator(free, args), _simulator(limited, args, "--rpm", str(RPM))]
    upstream = "sk-upstream-only-the-proxy-knows"
    config = {
        "model_list": [
            {"model_name": "sim-chat", "litellm_params": {
                "model": "openai/sim", "api_base": f"http://127.0.0.1:{free}/v1", "api_key": upstream}},
            {"model_name": "sim-claude", "litellm_params": {
                "model": "anthropic/sim", "api_base": f"http://127.0.0.1:{free}", "api_key": upstream}},
            {"model_name": "sim-limited", "litellm_params": {
                "model": "openai/sim", "api_base": f"http://127.0.0.1:{limited}/v1",
                "api_key": upstream}},
        ],
        "litellm_settings": {"num_retries": 0},  # the client's retries are under test, not its
        "general_settings": {"master_key": KEY},
    }
    (tmp / "config.yaml").write_text(json.dumps(config))  # JSON is YAML
    env = {**os.environ, "DISABLE_SCHEMA_UPDATE": "true", "LITELLM_LOG": "ERROR",
           "LITELLM_LOCAL_MODEL_COST_MAP": "True",  # no fetch of the price list: CI is offline
           "LITELLM_TELEMETRY": "False"}
    log = (tmp / "proxy.log").open("wb")
    proxy = subprocess.Popen([str(LITELLM), "--config", str(tmp / "config.yaml"), "--host",
                              "127.0.0.1", "--port", str(proxy_port)],
                             cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        _wait_listening(proxy_port, proxy, "the LiteLLM proxy", 120)
        yield {"proxy": f"http://127.0.0.1:{proxy_port}/v1", "direct": f"http://127.0.0.1:{free}/v1",
               "limited": f"http://127.0.0.1:{limited}/v1", "tmp": tmp, "args": args}
    finally:
        for proc in (proxy, *sims):
            _stop(proc)
        log.close()


def _eval(gateway: dict[str, Any], url: str, model: str, api: str, work: Path, *extra: str
          ) -> list[dict[str, Any]]:
    """One run as a user types it; its prediction rows, by sample id."""
    done = run_cli("eval", "--model", model, "--api-url", url, "--api-key", KEY, "--eval-type",
                   api, "--datasets", "general_vqa", "--dataset-args", gateway["args"], "--work-dir",
                   str(work), "--no-timestamp", *extra, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-2000:]
    rows = [json.loads(line) for f in sorted(work.glob("predictions/*/*.jsonl"))
            for line in f.read_text().splitlines()]
    return sorted(rows, key=lambda r: (r["sample_id"], r["repeat"]))


@pytest.mark.parametrize(("api", "model"), [("openai_api", "sim-chat"),
                                            ("anthropic_api", "sim-claude"),
                                            ("openai_responses_api", "sim-chat")])
def test_each_wire_format_through_the_proxy_gives_the_direct_answers_and_usage(
        gateway: dict[str, Any], api: str, model: str) -> None:
    tmp: Path = gateway["tmp"]
    direct = _eval(gateway, gateway["direct"], model, api, tmp / f"direct-{api}")
    proxied = _eval(gateway, gateway["proxy"], model, api, tmp / f"proxy-{api}")
    assert len(direct) == len(proxied) == 6
    for d, p in zip(direct, proxied, strict=True):
        assert p["status"] == d["status"] == "ok", p
        # --accuracy 1: the oracle answers the reference only when it recognises the
        # question with its image; a lost or altered image gives another answer
        assert p["prediction"] == d["prediction"] == p["sample"]["target"][0]
        assert p["usage"]["completion_tokens"] == d["usage"]["completion_tokens"]
        assert p["usage"]["prompt_tokens"] == d["usage"]["prompt_tokens"], (api, p["usage"])


def _drain(url: str, requests: int) -> int:
    """Send ``requests`` small chat requests straight to an upstream; the 429s counted."""
    body = json.dumps({"model": "sim", "messages": [{"role": "user", "content": "hi"}]}).encode()
    limited = 0
    for _ in range(requests):
        req = urllib.request.Request(f"{url}/chat/completions", data=body,
                                     headers={"content-type": "application/json"})
        try:
            urllib.request.urlopen(req, timeout=10).read()
        except urllib.error.HTTPError as err:
            limited += err.code == 429
    return limited


def _rate_headers(url: str) -> set[str]:
    """The rate-limit header names of one chat reply from ``url`` (a 200 or a 429)."""
    body = json.dumps({"model": "sim-limited", "messages": [{"role": "user", "content": "hi"}]})
    req = urllib.request.Request(f"{url}/chat/completions", data=body.encode(), headers={
        "content-type": "application/json", "authorization": f"Bearer {KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=30) as reply:
            headers = reply.headers
    except urllib.error.HTTPError as err:
        headers = err.headers
    return {k.lower() for k in headers if "ratelimit" in k.lower() or "retry-after" in k.lower()}


def test_the_simulators_litellm_style_sends_the_real_proxys_rate_headers(
        gateway: dict[str, Any]) -> None:
    """``simulate --gateway litellm`` stands in for the proxy in the offline tests and the
    rate-limit benchmark: its 200s and 429s carry the rate headers the real proxy's do."""
    sim_port = _free_port()
    sim = _simulator(sim_port, gateway["args"], "--rpm", str(RPM), "--gateway", "litellm")
    try:
        sim_url = f"http://127.0.0.1:{sim_port}/v1"
        real_ok, fake_ok = _rate_headers(gateway["proxy"]), _rate_headers(sim_url)
        _drain(gateway["limited"], RPM + 5)
        _drain(sim_url, RPM + 5)
        real_429, fake_429 = _rate_headers(gateway["proxy"]), _rate_headers(sim_url)
    finally:
        _stop(sim)
    assert "llm_provider-retry-after" in real_429  # the hint comes only prefixed
    assert "retry-after" not in real_429
    assert fake_ok == real_ok
    assert fake_429 == real_429


def test_a_provider_limit_behind_the_proxy_is_paced_not_failed(gateway: dict[str, Any]) -> None:
    """The upstream allows 120 requests a minute (a bucket full at start, then two a
    second); its bucket is emptied first, so the run's 30 requests meet the limit from the
    first one. The proxy answers 429 with the provider's hints under its own prefix
    (``llm_provider-retry-after``, ``llm_provider-x-ratelimit-reset-requests``); without
    --ignore-errors a single failed sample would stop the run."""
    assert _drain(gateway["limited"], RPM + 5) >= 1  # the limit binds: the bucket is empty
    work: Path = gateway["tmp"] / "limited"
    rows = _eval(gateway, gateway["proxy"], "sim-limited", "openai_api", work, "--repeats", "5",
                 "--eval-batch-size", "8")
    assert len(rows) == 30 and all(r["status"] == "ok" for r in rows)
    limits = json.loads((work / "rate_limits.json").read_text())["model"]
    assert limits["paused_s"] > 0, limits  # it waited as the hints said ...
    # only the first wave, sent before any reply told of the limit, may meet it; after that
    # the run keeps under it rather than retrying into it
    assert limits["rate_limited"] <= 8, limits
