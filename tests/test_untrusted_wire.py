"""Remote audio from an untrusted dataset (issue 13 item 2): an http(s) audio URL is fetched
at send time and sent as ``input_audio`` (base64 + the format its bytes have), never as an
``audio_url`` part, which the chat API does not have. The fetch is bounded (the 64 MiB media
cap, the request timeout, 3 redirects, http(s) only, no https -> http), carries no endpoint
credentials, and a failure is that sample's ``media_fetch`` error. The hostile records are
``tests/untrusted/wire/remote_audio.jsonl``, the hostile server ``tests/media_host.py``."""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cli_support import run_cli
from groundscope.client.chat import ChatClient
from groundscope.client.fetch import MediaFetcher, redirect_target
from groundscope.client.retry import RetryPolicy
from groundscope.errors import MediaFetchError
from groundscope.simulator import SimulatorServer
from groundscope.types import MediaPart, MediaRef, Message, Modality, TextPart
from media_fixtures import mp3_bytes
from media_host import WAV, MediaHost

CORPUS = Path(__file__).resolve().parent / "untrusted" / "wire"
EXPECTED: dict[str, list[Any]] = json.loads((CORPUS / "expected.json").read_text())
SECRET = "sk-wire-SECRET-4c2e8a6f1b3d5079"
URL_PASSWORD = "pw-media-SECRET-8d1f3b5a7c9e2406"
NO_RETRY = RetryPolicy(max_retries=0, base_delay=0.0, max_delay=0.0)


@pytest.fixture(scope="module")
def host() -> Iterator[MediaHost]:
    with MediaHost() as h:
        yield h


def audio(url: str, fmt: str | None = None) -> tuple[Message, ...]:
    ref = MediaRef(Modality.AUDIO, url, format=fmt)
    return (Message("user", (TextPart("What is this sound?"), MediaPart(ref))),)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


# ------------------------------------------------------------------ the wire


async def test_remote_audio_goes_out_as_input_audio_with_the_format_of_its_bytes(
        host: MediaHost) -> None:
    server = SimulatorServer(keep_bodies=True)
    async with server as url, ChatClient(url, "m", api_key=SECRET) as client:
        await client.complete(audio(host.url("/tone.wav")))
        await client.complete(audio(host.url("/tone.mp3"), fmt="wav"))  # served as text/plain
        wav, mp3 = (body["messages"][0]["content"][1] for body in server.bodies())
    assert wav == {"type": "input_audio", "input_audio": {"data": b64(WAV), "format": "wav"}}
    assert mp3 == {"type": "input_audio", "input_audio": {"data": b64(mp3_bytes()), "format": "mp3"}}
    assert SECRET not in repr(host.headers)  # the endpoint's key never goes to a media host
    assert not any(k.lower() == "authorization" for h in host.headers for k in h)


async def test_a_url_is_fetched_once_per_client_and_shared_by_concurrent_requests(
        host: MediaHost) -> None:
    url_of = host.url("/tone.wav?shared")
    before = host.hits["/tone.wav"]
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m") as client:
        await asyncio.gather(*(client.complete(audio(url_of)) for _ in range(6)))
        await client.complete(audio(url_of))
        assert client.fetcher.downloads == 1
    assert host.hits["/tone.wav"] - before == 1
    assert len(server.requests()) == 7


async def test_a_failure_is_remembered_and_sends_nothing(host: MediaHost) -> None:
    before = host.hits["/missing.wav"]
    server = SimulatorServer()
    async with server as url, ChatClient(url, "m", retry=NO_RETRY) as client:
        for _ in range(3):
            with pytest.raises(MediaFetchError) as info:
                await client.complete(audio(host.url("/missing.wav")))
            assert info.value.kind == "media_fetch"
            assert str(info.value) == f"audio URL {host.url('/missing.wav')}: HTTP 404 Not Found"
    assert host.hits["/missing.wav"] - before == 1
    assert server.requests() == []  # the model was never asked


async def test_url_credentials_are_used_but_never_shown(host: MediaHost) -> None:
    secret_url = f"http://reader:{URL_PASSWORD}@127.0.0.1:{host.port}/missing.wav?token={SECRET}"
    fetcher = MediaFetcher(timeout=5)
    try:
        with pytest.raises(MediaFetchError) as info:
            await fetcher.fetch(MediaRef(Modality.AUDIO, secret_url))
    finally:
        await fetcher.aclose()
    text = str(info.value)
    assert URL_PASSWORD not in text and SECRET not in text
    assert text == f"audio URL http://127.0.0.1:{host.port}/missing.wav?token=***: HTTP 404 Not Found"
    assert any(h.get("Authorization", "").startswith("Basic ") for h in host.headers)


async def test_a_refused_connection_is_a_media_fetch_error() -> None:
    fetcher = MediaFetcher(timeout=5)
    try:
        with pytest.raises(MediaFetchError, match=r"^audio URL http://127\.0\.0\.1:1/a\.wav: "
                                                  r"cannot fetch it \(ClientConnectorError"):
            await fetcher.fetch(MediaRef(Modality.AUDIO, "http://127.0.0.1:1/a.wav"))
    finally:
        await fetcher.aclose()


async def test_the_size_cap_applies_to_what_is_read(host: MediaHost) -> None:
    fetcher = MediaFetcher(timeout=5, max_bytes=1000)
    try:
        with pytest.raises(MediaFetchError, match=r"larger than the media cap of 1000 bytes "
                                                  r"\(Content-Length is \d+ bytes\)"):
            await fetcher.fetch(MediaRef(Modality.AUDIO, host.url("/tone.mp3")))
    finally:
        await fetcher.aclose()


def test_redirects_to_another_scheme_or_down_to_http_are_refused() -> None:
    assert redirect_target("http://a/x.wav", "/y.wav", "s") == "http://a/y.wav"
    assert redirect_target("http://a/x.wav", "https://b/y.wav", "s") == "https://b/y.wav"
    with pytest.raises(MediaFetchError, match="from https to plain http"):
        redirect_target("https://a/x.wav", "http://a/y.wav", "s")
    with pytest.raises(MediaFetchError, match="redirected to a file URL"):
        redirect_target("http://a/x.wav", "file:///etc/passwd", "s")
    with pytest.raises(MediaFetchError, match="without a Location"):
        redirect_target("http://a/x.wav", None, "s")


# ------------------------------------------------------------------ a run over the corpus


@pytest.mark.slow
def test_a_run_over_hostile_audio_urls(host: MediaHost, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{host.port}"
    data = tmp_path / "data"
    data.mkdir()
    text = (CORPUS / "remote_audio.jsonl").read_text().replace("{host}", base)
    (data / "remote.jsonl").write_text(text)
    server = SimulatorServer(keep_bodies=True)
    with server as url:
        proc = run_cli("eval", "--model", "m", "--api-url", url, "--api-key", SECRET,
                       "--datasets", "general_vqa", "--dataset-args", json.dumps(
                           {"general_vqa": {"local_path": str(data), "subset_list": ["remote"]}}),
                       "--work-dir", str(tmp_path / "out"), "--no-timestamp", "--ignore-errors",
                       "--timeout", "5", "--max-retries", "0", "--no-progress", cwd=tmp_path)
        bodies = server.bodies()
    assert proc.returncode == 0, proc.stderr
    preds = {row["sample_id"]: row for row in _rows(tmp_path / "out" / "predictions")}
    assert set(preds) == set(EXPECTED)
    for sample_id, (status, kind, message) in EXPECTED.items():
        row = preds[sample_id]
        assert (row["status"], row.get("error_kind")) == (status, kind), (sample_id, row)
        if message is not None:
            assert row["error"].startswith(message.replace("{host}", base)), (sample_id, row["error"])
    ok = sum(status == "ok" for status, _, _ in EXPECTED.values())
    assert len(bodies) == ok  # a failed fetch sends nothing
    parts = [p for b in bodies for m in b["messages"] if isinstance(m["content"], list)
             for p in m["content"] if p["type"] != "text"]
    assert sorted((p["type"], p["input_audio"]["format"]) for p in parts) == \
        [("input_audio", "mp3"), ("input_audio", "wav"), ("input_audio", "wav")]
    assert {p["input_audio"]["data"] for p in parts} == {b64(WAV), b64(mp3_bytes())}
    assert SECRET not in repr(host.headers)


def _rows(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.rglob("*.jsonl"))
            for line in path.read_text().splitlines() if line.strip()]
