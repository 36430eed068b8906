"""The OpenAI chat client: pure request/response helpers, then real HTTP against the simulator."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import logging
import random
import tracemalloc
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
from PIL import Image
from pydantic import SecretStr

from groundscope.client.chat import ChatClient
from groundscope.client.http_errors import http_error, parse_retry_after
from groundscope.client.openai import (
    build_body,
    effective_config,
    normalise_url,
    request_hash,
    wire_messages,
)
from groundscope.client.reply import parse_completion
from groundscope.client.retry import RetryPolicy
from groundscope.errors import ConfigError, MediaError, ResponseError, RetryableError
from groundscope.simulator import SimBehaviour, SimulatorServer
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
SECRET = "sk-test-7f3a9c1e5b2d4a6f8e0c"
FAST = RetryPolicy(max_retries=5, base_delay=0.0, max_delay=0.0)
MP4_HEAD = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00\x00\x00\x08free"


def user(text: str) -> tuple[Message, ...]:
    return (Message("user", text),)


@pytest.fixture
def mp4(tmp_path: Path) -> Path:
    path = tmp_path / "clip.mp4"
    path.write_bytes(MP4_HEAD)
    return path


def media_message(png: Path, wav: Path, mp4: Path) -> tuple[Message, ...]:
    parts = (
        TextPart("Describe"),
        MediaPart(MediaRef(Modality.IMAGE, str(png), detail="low")),
        MediaPart(MediaRef(Modality.AUDIO, str(wav))),
        MediaPart(MediaRef(Modality.VIDEO, str(mp4))),
        MediaPart(MediaRef(Modality.IMAGE, "https://example.org/cat.jpg")),
    )
    return (Message("system", "Be brief."), Message("user", parts))


# ------------------------------------------------------------------ pure: building


def test_body_defaults_temperature_to_zero_and_sends_no_stream_key() -> None:
    body = build_body(user("hi"), "m1", {})
    assert body == {
        "model": "m1",
        "messages": [{"role": "user", "content": "hi"}],
        "temperature": 0,
    }


def test_body_passes_settings_and_unknown_keys_through() -> None:
    config = {
        "temperature": 0.7,
        "seed": 3,
        "max_tokens": 64,
        "top_p": 0.9,
        "repetition_penalty": 1.1,
        "stream": True,
        "model": "other",
        "logprobs": None,
    }
    body = build_body(user("hi"), "m1", config)
    assert body["temperature"] == 0.7
    assert (body["seed"], body["max_tokens"], body["top_p"]) == (3, 64, 0.9)
    assert body["repetition_penalty"] == 1.1
    assert "stream" not in body  # never streamed: the API's default, as EvalScope sends it
    assert body["model"] == "m1"
    assert "logprobs" not in body
    assert effective_config(None) == {"temperature": 0}


def test_wire_form_of_text_image_audio_video(png: Path, wav: Path, mp4: Path) -> None:
    wire = wire_messages(media_message(png, wav, mp4))
    assert wire[0] == {"role": "system", "content": "Be brief."}
    text, image, audio, video, remote = wire[1]["content"]
    assert text == {"type": "text", "text": "Describe"}
    assert image["type"] == "image_url"
    assert image["image_url"]["detail"] == "low"
    prefix = "data:image/png;base64,"
    assert image["image_url"]["url"].startswith(prefix)
    assert base64.b64decode(image["image_url"]["url"][len(prefix) :]) == png.read_bytes()
    assert audio == {
        "type": "input_audio",
        "input_audio": {"data": base64.b64encode(wav.read_bytes()).decode(), "format": "wav"},
    }
    assert video["type"] == "video_url"
    assert video["video_url"]["url"] == ("data:video/mp4;base64," + base64.b64encode(MP4_HEAD).decode())
    assert remote == {"type": "image_url",
                      "image_url": {"url": "https://example.org/cat.jpg", "detail": "auto"}}


def test_request_hash_is_stable_and_content_sensitive(png: Path, tmp_path: Path) -> None:
    msgs = (Message("user", (TextPart("What?"), MediaPart(MediaRef(Modality.IMAGE, str(png))))),)
    base = request_hash(msgs, "m", {})
    assert base == request_hash(msgs, "m", {"temperature": 0})
    assert len(base) == 64
    assert base != request_hash(msgs, "m2", {})
    assert base != request_hash(msgs, "m", {"seed": 1})
    other = tmp_path / "other.png"
    Image.new("RGB", (5, 5)).save(other)
    swapped = (Message("user", (TextPart("What?"), MediaPart(MediaRef(Modality.IMAGE, str(other))))),)
    assert base != request_hash(swapped, "m", {})
    assert base != request_hash((Message("system", msgs[0].content),), "m", {})


def test_request_hash_never_reads_media(monkeypatch: pytest.MonkeyPatch) -> None:
    from groundscope import media

    def boom(*_: Any, **__: Any) -> Any:
        raise AssertionError("request_hash must not encode media")

    monkeypatch.setattr(media, "wire_part", boom)
    monkeypatch.setattr(media, "load", boom)
    inline = MediaRef(Modality.IMAGE, b"\x89PNG\r\n\x1a\n" + b"0" * 32)
    assert request_hash((Message("user", (MediaPart(inline),)),), "m", None)


def test_media_error_is_raised_before_sending(tmp_path: Path) -> None:
    missing = MediaRef(Modality.IMAGE, str(tmp_path / "nope.png"))
    with pytest.raises(MediaError):
        build_body((Message("user", (MediaPart(missing),)),), "m", {})


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h:8000/v1", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/", "http://h:8000/v1/chat/completions"),
        ("http://h:8000/v1/chat/completions", "http://h:8000/v1/chat/completions"),
        ("http://h:8000", "http://h:8000/v1/chat/completions"),
        ("https://h/openai/deploy", "https://h/openai/deploy/chat/completions"),
    ],
)
def test_normalise_url(url: str, expected: str) -> None:
    assert normalise_url(url) == expected


@pytest.mark.parametrize("url", ["", "127.0.0.1:8000/v1", "ftp://h/v1"])
def test_unusable_url_is_a_config_error(url: str) -> None:
    with pytest.raises(ConfigError, match="http"):
        ChatClient(url, "m")


# ------------------------------------------------------------------ pure: parsing


def test_parse_completion_reads_text_reasoning_usage() -> None:
    payload = {
        "model": "m",
        "choices": [
            {"message": {"content": "Paris", "reasoning_content": "thinking"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9},
    }
    c = parse_completion(orjson.dumps(payload))
    assert (c.text, c.reasoning, c.finish_reason, c.model) == ("Paris", "thinking", "stop", "m")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (7, 2, 9)


def test_parse_completion_content_parts_and_none() -> None:
    parts = {
        "choices": [{"message": {"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}}]
    }
    assert parse_completion(orjson.dumps(parts)).text == "ab"
    empty = parse_completion(orjson.dumps(
        {"choices": [{"message": {"content": None}, "finish_reason": "length"}], "usage": None}
    ))
    assert (empty.text, empty.finish_reason, empty.usage.total_tokens) == ("", "length", 0)


def test_parse_completion_without_choices() -> None:
    """No choices and no reason: malformed (retried); an error object in a 200 is the
    server's refusal (not retried)."""
    with pytest.raises(RetryableError, match="no choices") as malformed:
        parse_completion(b'{"id": "x"}')
    assert malformed.value.kind == "malformed_response"
    with pytest.raises(ResponseError, match="quota gone"):
        parse_completion(b'{"error": {"message": "quota gone"}}')
    with pytest.raises(ResponseError) as info:
        parse_completion(b'{"choices": [{"message": {"content": ""}, "finish_reason": "content_filter"}]}')
    assert info.value.kind == "content_filter"


def test_parse_retry_after_seconds_and_http_date() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after(None) is None
    assert parse_retry_after("soon") is None
    now = datetime(2024, 1, 1, tzinfo=UTC)
    later = format_datetime(now + timedelta(seconds=30), usegmt=True)
    assert parse_retry_after(later, now=now.timestamp()) == pytest.approx(30.0)
    assert parse_retry_after(format_datetime(now, usegmt=True), now=now.timestamp() + 5) == 0.0


def test_http_error_mapping() -> None:
    err = http_error(429, b'{"error": {"message": "slow down"}}', "2")
    assert isinstance(err, RetryableError)
    assert (err.retry_after, err.status, err.kind) == (2.0, 429, "http_429")
    assert isinstance(http_error(503, b"upstream gone", None), RetryableError)
    assert isinstance(http_error(408, b"", None), RetryableError)
    bad = http_error(400, b'{"error": {"message": "bad image", "code": null}}', None)
    assert isinstance(bad, ResponseError)
    assert (str(bad), bad.kind) == ("HTTP 400: bad image", "http_400")
    ctx = http_error(400, b'{"error": {"message": "too long", "code": "context_length_exceeded"}}', None)
    assert ctx.kind == "context_length"
    vllm = http_error(
        400,
        b'{"object": "error", "message": "This model\'s maximum context length is 4096 tokens", "code": 400}',
        None,
    )
    assert vllm.kind == "context_length"
    filt = http_error(400, b'{"error": {"message": "blocked", "code": "content_filter"}}', None)
    assert filt.kind == "content_filter"
    text = http_error(404, b"<html>not found</html>" + b"x" * 2000, None)
    assert isinstance(text, ResponseError)
    assert str(text).startswith("HTTP 404: <html>not found</html>")
    assert len(str(text)) < 600


def test_client_repr_and_attributes_hide_the_key() -> None:
    client = ChatClient("http://127.0.0.1:1/v1", "m", api_key=SECRET)
    assert SECRET not in repr(client)
    assert SECRET not in str(vars(client))
    assert isinstance(client.api_key, SecretStr)


# ------------------------------------------------------------------ real HTTP


def samples_for(n: int) -> list[Sample]:
    return [
        Sample(
            id=f"s{i}",
            dataset="d",
            subset="x",
            messages=user(f"question {i}"),
            origin=Origin(Path("d.jsonl"), i + 1),
            target=(f"answer {i}",),
            answer_kind=AnswerKind.FREE,
        )
        for i in range(n)
    ]


async def test_completes_and_sends_the_bearer_key() -> None:
    server = SimulatorServer(samples_for(2))
    async with server as url, ChatClient(url, "sim-model", api_key=SecretStr(SECRET), retry=FAST) as client:
        completion = await client.complete(user("question 1"))
        (record,) = server.requests()
    assert completion.text == "answer 1"
    assert completion.model == "sim-model"
    assert completion.finish_reason == "stop"
    assert completion.usage.completion_tokens > 0
    assert record["auth_sha256"] == hashlib.sha256(f"Bearer {SECRET}".encode()).hexdigest()[:16]
    assert "authorization" not in {k.lower() for k in record["headers"]}
    assert record["body"]["temperature"] == 0


@pytest.mark.parametrize("key", [None, ""])
async def test_no_authorization_without_a_key(key: str | None) -> None:
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m", api_key=key) as client:
        await client.complete(user("hello"))
        (record,) = server.requests()
    assert record["auth_sha256"] is None


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("rate_429", "http_429"),
        ("rate_500", "http_500"),
        ("rate_malformed", "malformed_response"),
        ("rate_disconnect", "connection"),
        ("rate_timeout", "timeout"),
    ],
)
async def test_retries_each_fault_until_success(fault: str, kind: str) -> None:
    behaviour = SimBehaviour(max_faults_per_key=2, retry_after_s=0, hang_s=10.0, **{fault: 1.0})
    seen: list[tuple[int, str]] = []
    server = SimulatorServer(samples_for(1), behaviour)
    async with server as url, ChatClient(url, "m", retry=FAST, timeout=0.3) as client:
        completion = await client.complete(
            user("question 0"), on_retry=lambda a, e, d: seen.append((a, e.kind))
        )
        attempts = [r["attempt"] for r in server.requests()]
    assert completion.text == "answer 0"
    assert seen == [(1, kind), (2, kind)]
    assert sorted(attempts) == [1, 2, 3]


async def test_retry_after_header_sets_the_delay_floor() -> None:
    behaviour = SimBehaviour(rate_429=1.0, max_faults_per_key=2, retry_after_s=0.05)
    policy = RetryPolicy(max_retries=3, base_delay=0.0, max_delay=1.0)
    delays: list[float | None] = []
    server = SimulatorServer(samples_for(1), behaviour)
    async with server as url, ChatClient(url, "m", retry=policy) as client:
        await client.complete(user("question 0"), on_retry=lambda a, e, d: delays.extend([e.retry_after, d]))
    assert delays == [0.05, 0.05, 0.05, 0.05]


async def test_retry_budget_exhausted_raises_with_attempts() -> None:
    behaviour = SimBehaviour(rate_500=1.0)
    server = SimulatorServer(behaviour=behaviour)
    async with (
        server as url,
        ChatClient(url, "m", retry=RetryPolicy(max_retries=2, base_delay=0.0, max_delay=0.0)) as client,
    ):
        with pytest.raises(RetryableError) as info:
            await client.complete(user("x"))
    assert (info.value.attempts, info.value.kind, info.value.status) == (3, "http_500", 500)
    assert "simulated" in str(info.value)


async def test_non_retryable_400_carries_the_server_message() -> None:
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m", retry=FAST) as client:
        with pytest.raises(ResponseError) as info:
            await client.complete(user("x"), generation_config={"temperature": 5})
        assert len(server.requests()) == 1
    assert info.value.status == 400
    assert info.value.attempts == 1
    assert "Invalid 'temperature'" in str(info.value)
    assert info.value.kind == "http_400"


async def test_context_length_error_kind() -> None:
    behaviour = SimBehaviour(max_context_tokens=20)
    server = SimulatorServer(behaviour=behaviour)
    async with server as url, ChatClient(url, "m") as client:
        with pytest.raises(ResponseError) as info:
            await client.complete(user("word " * 100))
    assert info.value.kind == "context_length"
    assert "maximum context length is 20 tokens" in str(info.value)


async def test_media_error_is_not_retried(tmp_path: Path) -> None:
    msg = (Message("user", (MediaPart(MediaRef(Modality.IMAGE, str(tmp_path / "x.png"))),)),)
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m", retry=FAST) as client:
        with pytest.raises(MediaError):
            await client.complete(msg)
        assert server.requests() == []


async def test_media_request_on_the_wire(png: Path, wav: Path, mp4: Path) -> None:
    server = SimulatorServer(keep_bodies=True)
    async with server as url, ChatClient(url, "m", generation_config={"seed": 7, "max_tokens": 32}) as client:
        await client.complete(media_message(png, wav, mp4), generation_config={"top_p": 0.5})
        (raw,) = server.bodies()
        (record,) = server.requests()
    assert raw["messages"] == wire_messages(media_message(png, wav, mp4))
    assert (raw["seed"], raw["max_tokens"], raw["top_p"], raw["temperature"]) == (7, 32, 0.5, 0)
    assert "stream" not in raw
    recorded = orjson.dumps(record).decode()
    assert base64.b64encode(png.read_bytes()).decode() not in recorded
    assert base64.b64encode(wav.read_bytes()).decode() not in recorded


async def test_secret_never_in_errors_or_logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    behaviour = SimBehaviour(rate_500=0.5, rate_disconnect=0.5, max_faults_per_key=1)
    server = SimulatorServer(behaviour=behaviour)
    async with server as url:
        async with ChatClient(url, "m", api_key=SECRET, retry=FAST, timeout=5) as client:
            await client.complete(user("a"))
            for config in ({"temperature": 9}, {"stream_options": 1, "top_p": 7}):
                try:
                    await client.complete(user("b"), generation_config=config)
                except ResponseError as exc:
                    errors.append(exc)
        dead = ChatClient(
            "http://127.0.0.1:9/v1",
            "m",
            api_key=SECRET,
            retry=RetryPolicy(max_retries=1, base_delay=0.0, max_delay=0.0),
        )
        try:
            await dead.complete(user("c"))
        except RetryableError as exc:
            errors.append(exc)
        finally:
            await dead.aclose()
    assert len(errors) == 3
    for exc in errors:
        assert SECRET not in f"{exc!s} {exc!r} {exc.args} {exc.__cause__!r}"
    assert caplog.records
    for rec in caplog.records:
        assert SECRET not in rec.getMessage()
        assert SECRET not in str(rec.__dict__)


async def test_concurrent_requests_all_succeed() -> None:
    samples = samples_for(200)
    behaviour = SimBehaviour(
        latency_ms=1.0,
        jitter_ms=2.0,
        rate_500=0.1,
        rate_429=0.1,
        retry_after_s=0,
        max_faults_per_key=2,
        seed=11,
    )
    server = SimulatorServer(samples, behaviour)
    async with server as url, ChatClient(url, "m", retry=FAST, concurrency=32) as client:
        results = await asyncio.gather(*(client.complete(s.messages) for s in samples))
        stats = server.stats()
    assert [r.text for r in results] == [s.target[0] for s in samples]
    assert stats["completions"] == 200
    assert stats["requests"] == 200 + sum(stats["by_fault"].values())
    assert stats["by_fault"]  # some faults were injected and retried


async def test_session_is_reused_and_recreated_after_close() -> None:
    server = SimulatorServer()
    async with server as url:
        client = ChatClient(url, "m")
        await client.complete(user("a"))
        first = client._session
        await client.complete(user("b"))
        assert client._session is first
        await client.aclose()
        await client.aclose()
        await client.complete(user("c"))
        assert client._session is not first
        await client.aclose()


async def test_a_request_in_flight_holds_its_body_at_the_bodys_size(tmp_path: Path) -> None:
    # orjson (3.12+) returns its whole output buffer, ~16x a long string's length: a 133 KB
    # body held 2 MB for as long as its request was in flight (128 of them at concurrency 128)
    photo = tmp_path / "photo.png"
    Image.frombytes("RGB", (200, 170), random.Random(0).randbytes(200 * 170 * 3)).save(photo)
    msg = (Message("user", (TextPart("What is it?"), MediaPart(MediaRef(Modality.IMAGE, str(photo))))),)
    held: list[tuple[int, int]] = []
    send = ChatClient._send

    async def measured(self: ChatClient, session: Any, body: bytes) -> Any:
        where = tracemalloc.get_object_traceback(body)
        assert where is not None  # traced: else the sum below would check nothing
        snapshot = tracemalloc.take_snapshot()
        held.append((len(body), sum(t.size for t in snapshot.traces if t.traceback == where)))
        return await send(self, session, body)

    tracing = tracemalloc.is_tracing()  # someone else's tracing (PYTHONTRACEMALLOC) stays on
    if not tracing:
        tracemalloc.start(1)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(ChatClient, "_send", measured)
            async with SimulatorServer() as url, ChatClient(url, "m", retry=FAST) as client:
                await client.complete(msg)
    finally:
        if not tracing:
            tracemalloc.stop()
    ((size, allocated),) = held
    assert size > 100_000  # the image's base64 is in the body
    assert allocated < 2 * size
