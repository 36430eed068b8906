"""The offline model simulator: oracle, deterministic behaviour, failures and observability."""

from __future__ import annotations

import asyncio
import base64
import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from PIL import Image

from groundscope.client.chat import ChatClient
from groundscope.client.openai import build_body
from groundscope.client.retry import RetryPolicy
from groundscope.simulator.server import (
    DISTRACTOR,
    GENERIC_ANSWER,
    Oracle,
    SimBehaviour,
    SimReply,
    SimRequest,
    SimulatorServer,
    bytes_id,
    oracle_key,
    sample_media_id,
)
from groundscope.types import (
    AnswerKind,
    MediaPart,
    MediaRef,
    Message,
    Modality,
    Origin,
    Sample,
    TextPart,
)

pytestmark = pytest.mark.usefixtures("tmp_media_root")  # media named by tmp_path paths
FAST = RetryPolicy(max_retries=6, base_delay=0.0, max_delay=0.0)
LETTERS = ("A", "B", "C", "D")


def free(i: int, text: str, answer: str, *media: MediaRef) -> Sample:
    content = (TextPart(text), *(MediaPart(m) for m in media)) if media else text
    return Sample(
        id=f"f{i}",
        dataset="vqa",
        subset="s",
        origin=Origin(Path("v.jsonl"), i),
        messages=(Message("user", content),),
        target=(answer,),
    )


def choice(i: int, text: str, letter: str) -> Sample:
    return Sample(
        id=f"c{i}",
        dataset="mcq",
        subset="s",
        origin=Origin(Path("m.jsonl"), i),
        messages=(Message("system", "Answer well."), Message("user", text)),
        target=(letter,),
        answer_kind=AnswerKind.CHOICE,
        choices=LETTERS,
    )


def image(tmp_path: Path, name: str, colour: tuple[int, int, int]) -> MediaRef:
    path = tmp_path / name
    Image.new("RGB", (3, 3), colour).save(path)
    return MediaRef(Modality.IMAGE, str(path))


@pytest.fixture
def samples(tmp_path: Path) -> list[Sample]:
    red, blue = image(tmp_path, "red.png", (255, 0, 0)), image(tmp_path, "blue.png", (0, 0, 255))
    return [
        free(1, "What colour is it?", "red", red),
        free(2, "What colour is it?", "blue", blue),
        free(3, "How many cats?", "three"),
        choice(4, "Pick the odd one out.", "C"),
        choice(5, "Which is largest?", "A"),
    ]


async def ask(client: ChatClient, sample: Sample) -> str:
    return (await client.complete(sample.messages)).text


# ------------------------------------------------------------------ pure parts


def test_oracle_key_is_deterministic_and_order_sensitive() -> None:
    assert oracle_key(["a", "b"], ["m1"]) == oracle_key(["a", "b"], ["m1"])
    assert oracle_key(["a", "b"], []) != oracle_key(["b", "a"], [])
    assert oracle_key(["a"], ["m1"]) != oracle_key(["a"], [])
    assert oracle_key(["a", "b"], []) != oracle_key(["ab"], [])


def test_sample_media_id_hashes_bytes_and_keeps_urls(tmp_path: Path) -> None:
    ref = image(tmp_path, "x.png", (1, 2, 3))
    assert sample_media_id(ref) == bytes_id(Path(ref.source).read_bytes())  # type: ignore[arg-type]
    url = MediaRef(Modality.IMAGE, "https://example.org/a.png")
    assert sample_media_id(url) == "https://example.org/a.png"


def test_behaviour_decisions_are_deterministic_and_capped() -> None:
    b = SimBehaviour(rate_500=0.3, rate_429=0.2, seed=5)
    faults = [b.fault(f"k{i}", 1) for i in range(2000)]
    assert faults == [b.fault(f"k{i}", 1) for i in range(2000)]
    assert 0.25 < faults.count("500") / 2000 < 0.35
    assert 0.15 < faults.count("429") / 2000 < 0.25
    always = SimBehaviour(rate_timeout=1.0, max_faults_per_key=3)
    assert [always.fault("k", n) for n in range(1, 6)] == ["timeout"] * 3 + [None, None]
    assert SimBehaviour().fault("k", 1) is None
    assert all(SimBehaviour(accuracy=1.0).correct(f"k{i}") for i in range(100))
    assert not any(SimBehaviour(accuracy=0.0).correct(f"k{i}") for i in range(100))
    assert SimBehaviour(latency_ms=5, jitter_ms=10, seed=1).latency_s("k", 1) == pytest.approx(
        SimBehaviour(latency_ms=5, jitter_ms=10, seed=1).latency_s("k", 1)
    )


@pytest.mark.parametrize(
    "kwargs", [{"rate_500": 0.6, "rate_429": 0.6}, {"accuracy": 1.5}, {"rate_timeout": -0.1}]
)
def test_behaviour_rejects_bad_rates(kwargs: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        SimBehaviour(**kwargs)  # type: ignore[arg-type]


def test_oracle_indexes_what_the_wire_will_carry(samples: list[Sample]) -> None:
    oracle = Oracle.from_samples(samples)
    assert len(oracle) == 5
    body = build_body(samples[0].messages, "m", {})
    assert body["messages"][0]["content"][1]["image_url"]["url"].startswith("data:image/png")


# ------------------------------------------------------------------ the oracle over HTTP


async def test_accuracy_one_answers_every_reference(samples: list[Sample]) -> None:
    async with SimulatorServer(samples) as url, ChatClient(url, "m") as client:
        answers = [await ask(client, s) for s in samples]
    assert answers[:3] == ["red", "blue", "three"]
    assert answers[3].splitlines()[-1] == "ANSWER: C"
    assert answers[4].splitlines()[-1] == "ANSWER: A"


async def test_accuracy_zero_answers_wrong_deterministically(samples: list[Sample]) -> None:
    behaviour = SimBehaviour(accuracy=0.0, seed=3)
    async with SimulatorServer(samples, behaviour) as url, ChatClient(url, "m") as client:
        answers = [await ask(client, s) for s in samples]
        again = [await ask(client, s) for s in samples]
    assert answers == again
    for sample, answer in zip(samples[:3], answers[:3], strict=True):
        assert answer != sample.target[0]
        assert answer in {"red", "blue", "three"}
    for sample, answer in zip(samples[3:], answers[3:], strict=True):
        letter = answer.rsplit("ANSWER: ", 1)[1]
        assert letter in LETTERS
        assert letter != sample.target[0]


async def test_wrong_free_form_with_a_single_reference_uses_the_distractor() -> None:
    only = [free(1, "Name it.", "a lighthouse")]
    async with SimulatorServer(only, SimBehaviour(accuracy=0.0)) as url, ChatClient(url, "m") as client:
        assert await ask(client, only[0]) == DISTRACTOR


async def test_text_only_fallback_when_media_differ(tmp_path: Path, samples: list[Sample]) -> None:
    green = image(tmp_path, "green.png", (0, 255, 0))
    same_text = free(9, "How many cats?", "?", green)  # unique text of sample 3, other media
    shared_text = free(10, "What colour is it?", "?", green)  # text of samples 1 and 2
    unknown = free(11, "Never seen this.", "?")
    async with SimulatorServer(samples) as url, ChatClient(url, "m") as client:
        assert await ask(client, same_text) == "three"
        assert await ask(client, shared_text) == GENERIC_ANSWER
        assert await ask(client, unknown) == GENERIC_ANSWER
    recoloured = free(12, "What colour is it?", "?", image(tmp_path, "red2.png", (255, 1, 0)))
    async with SimulatorServer(samples[:1]) as url, ChatClient(url, "m") as client:
        assert await ask(client, recoloured) == "red"  # the text is unique in this oracle


async def test_request_key_matches_the_sample_key(samples: list[Sample]) -> None:
    server = SimulatorServer(samples)
    async with server as url, ChatClient(url, "m") as client:
        await ask(client, samples[0])
        (record,) = server.requests()
    ref = samples[0].media()[0]
    assert record["key"] == oracle_key(["What colour is it?"], [sample_media_id(ref)])


async def test_same_seed_same_run_different_seed_different_run(samples: list[Sample]) -> None:
    many = [free(i, f"question {i}", f"answer {i}") for i in range(40)]

    async def run(seed: int) -> tuple[list[str], list[Any]]:
        behaviour = SimBehaviour(
            accuracy=0.5, seed=seed, rate_500=0.2, rate_malformed=0.2, max_faults_per_key=2
        )
        server = SimulatorServer(many, behaviour)
        async with server as url, ChatClient(url, "m", retry=FAST) as client:
            answers = [await ask(client, s) for s in many]
            trace = [(r["key"], r["attempt"], r["status"]) for r in server.requests()]
        return answers, trace

    first, second, other = await run(1), await run(1), await run(2)
    assert first == second
    assert first[0] != other[0]
    assert 5 < sum(a == s.target[0] for a, s in zip(first[0], many, strict=True)) < 35


async def test_responders_run_before_the_oracle(samples: list[Sample]) -> None:
    seen: list[SimRequest] = []

    def judge(req: SimRequest) -> SimReply | None:
        seen.append(req)
        if any("JUDGE" in t for t in req.texts):
            return SimReply('{"reasoning": "same", "verdict": "A"}', reasoning="compared")
        return None

    async with SimulatorServer(samples, responders=[judge]) as url, ChatClient(url, "m") as client:
        verdict = await client.complete((Message("user", "JUDGE this"),))
        plain = await ask(client, samples[2])
    assert verdict.text == '{"reasoning": "same", "verdict": "A"}'
    assert verdict.reasoning == "compared"
    assert plain == "three"
    assert [r.attempt for r in seen] == [1, 1]


async def test_hanging_request_is_released_on_stop() -> None:
    server = SimulatorServer(behaviour=SimBehaviour(rate_timeout=1.0, hang_s=60.0))
    url = await server.astart()
    async with aiohttp.ClientSession() as session:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        task = asyncio.create_task(
            session.post(f"{url}/chat/completions", json=body, timeout=aiohttp.ClientTimeout(total=20))
        )
        while not server.stats()["keys"]:  # until the request has arrived (and hangs)
            assert not task.done(), task
            await asyncio.sleep(0.005)
        assert not task.done()
        await server.astop()
        resp = await task
        assert resp.status == 503  # answered at once, not after hang_s (nor the client's 20 s)
        assert (await resp.json())["error"]["message"] == "the simulator is shutting down"
    assert [(r["status"], r["fault"]) for r in server.requests()] == [(503, "timeout")]


# ------------------------------------------------------------------ raw HTTP, threaded server


def http(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, dict[str, str], bytes]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    req = urllib.request.Request(
        url, data=data, headers={"Content-Type": "application/json", "Authorization": "Bearer sk-hidden"}
    )
    try:
        with opener.open(req, timeout=10) as resp:
            return resp.status, dict(resp.headers), resp.read()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read()


def chat(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "echo-me", "messages": [{"role": "user", "content": text}], **extra}


def test_threaded_server_endpoints_and_records(samples: list[Sample]) -> None:
    server = SimulatorServer(samples, SimBehaviour(seed=4), model="sim-x")
    with server as url:
        status, _, raw = http(f"{url}/models")
        assert status == 200
        assert json.loads(raw)["data"][0]["id"] == "sim-x"
        status, _, raw = http(f"{url}/chat/completions", chat("How many cats?"))
        reply = json.loads(raw)
        assert status == 200
        assert reply["model"] == "echo-me"
        assert reply["object"] == "chat.completion"
        assert reply["id"].startswith("chatcmpl-")
        assert reply["choices"][0]["message"]["content"] == "three"
        assert reply["choices"][0]["finish_reason"] == "stop"
        usage = reply["usage"]
        assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"] > 2
        records = json.loads(http(f"{url.removesuffix('/v1')}/_sim/requests")[2])
        stats = json.loads(http(f"{url.removesuffix('/v1')}/_sim/stats")[2])
        assert records == server.requests()
        assert [r["path"] for r in records] == ["/v1/models", "/v1/chat/completions"]
        assert records[1]["attempt"] == 1
        assert records[1]["auth_sha256"]
        assert "sk-hidden" not in json.dumps(records)
        assert stats["requests"] == 2
        assert stats["by_status"] == {"200": 2}
        assert server.bodies() == []  # raw bodies only with keep_bodies=True
        http(f"{url.removesuffix('/v1')}/_sim/reset", raw=b"")
        assert server.stats()["requests"] == 0
    assert server._runner is None


@pytest.mark.parametrize(
    ("body", "raw", "needle"),
    [
        (None, b"{not json", "could not parse"),
        (None, b"[1, 2]", "JSON object"),
        ({"model": "m", "messages": []}, None, "non-empty"),
        (chat("x") | {"stream": "yes"}, None, "stream"),  # stream: true is served (SSE)
        ({"messages": [{"role": "user", "content": "x"}]}, None, "model parameter"),
        (
            {"model": "m", "messages": [{"role": "user", "content": [{"type": "pdf"}]}]},
            None,
            "Invalid content part type",
        ),
        ({"model": "m", "messages": [{"role": "wizard", "content": "x"}]}, None, "role"),
        (chat("x") | {"max_tokens": 0}, None, "max_tokens"),
        (
            {
                "model": "m",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,@@@"}}],
                    }
                ],
            },
            None,
            "base64",
        ),
    ],
)
def test_bad_requests_get_openai_style_400s(body: Any, raw: bytes | None, needle: str) -> None:
    with SimulatorServer() as url:
        status, headers, payload = http(f"{url}/chat/completions", body, raw)
    assert status == 400
    assert headers["Content-Type"].startswith("application/json")
    error = json.loads(payload)["error"]
    assert needle in error["message"]
    assert error["type"] == "invalid_request_error"


def test_injected_faults_on_the_wire() -> None:
    behaviour = SimBehaviour(rate_429=1.0, retry_after_s=1, max_faults_per_key=1)
    with SimulatorServer(behaviour=behaviour) as url:
        status, headers, payload = http(f"{url}/chat/completions", chat("a"))
        assert (status, headers["Retry-After"]) == (429, "1")
        assert json.loads(payload)["error"]["code"] == "rate_limit_exceeded"
        assert http(f"{url}/chat/completions", chat("a"))[0] == 200
    with SimulatorServer(behaviour=SimBehaviour(rate_malformed=1.0)) as url:
        status, _, payload = http(f"{url}/chat/completions", chat("b"))
        assert status == 200
        with pytest.raises(json.JSONDecodeError):
            json.loads(payload)
    with SimulatorServer(behaviour=SimBehaviour(rate_500=1.0)) as url:
        assert http(f"{url}/chat/completions", chat("c"))[0] == 500


async def test_disconnect_closes_without_a_response() -> None:
    server = SimulatorServer(behaviour=SimBehaviour(rate_disconnect=1.0))
    async with server as url, aiohttp.ClientSession() as session:
        with pytest.raises(aiohttp.ClientConnectionError):
            async with session.post(f"{url}/chat/completions", json=chat("d")) as resp:
                await resp.read()
    assert server.stats()["by_fault"] == {"disconnect": 1}
    assert server.requests()[0]["status"] == 0


async def test_records_strip_base64_and_keep_bodies_keeps_it(tmp_path: Path) -> None:
    wav_bytes = b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(200)
    png = image(tmp_path, "p.png", (9, 9, 9))
    png_b64 = base64.b64encode(Path(str(png.source)).read_bytes()).decode()
    wav_b64 = base64.b64encode(wav_bytes).decode()
    body = {
        "model": "m",
        "messages": [
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "listen and look"},
                    {"type": "input_audio", "input_audio": {"data": wav_b64, "format": "wav"}},
                    {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png_b64}"}},
                    {"type": "video_url", "video_url": {"url": "https://example.org/v.mp4"}},
                ],
            }
        ],
    }
    server = SimulatorServer(keep_bodies=True)
    async with (
        server as url,
        aiohttp.ClientSession() as session,
        session.post(f"{url}/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
    (record,) = server.requests()
    text = json.dumps(record)
    assert png_b64 not in text
    assert wav_b64 not in text
    png_id = bytes_id(Path(str(png.source)).read_bytes())
    assert record["key"] == oracle_key(
        ["listen and look"], [bytes_id(wav_bytes), png_id, "https://example.org/v.mp4"]
    )
    parts = record["body"]["messages"][0]["content"]
    assert png_id in parts[2]["image_url"]["url"]
    assert parts[3]["video_url"]["url"] == "https://example.org/v.mp4"
    assert server.bodies() == [body]


def test_a_model_list_refuses_other_names_and_is_what_v1_models_offers() -> None:
    with SimulatorServer(behaviour=SimBehaviour(models=("vl-large", "vl-small"),
                                                gateway="litellm")) as url:
        status, _, raw = http(f"{url}/models")
        assert status == 200 and [m["id"] for m in json.loads(raw)["data"]] == ["vl-large", "vl-small"]
        status, _, raw = http(f"{url}/chat/completions", {**chat("hi"), "model": "vl-larg"})
        assert status == 400 and json.loads(raw)["error"]["code"] == "model_not_found"
        status, _, _ = http(f"{url}/chat/completions", {**chat("hi"), "model": "vl-small"})
        assert status == 200
