"""The response cache and the CachedChat layer over ChatClient."""

from __future__ import annotations

import asyncio
from pathlib import Path

from groundscope.client.cache import CachedChat, ResponseCache, cache_key
from groundscope.client.chat import ChatClient
from groundscope.scoring.judge_prompt import judge_prompt
from groundscope.simulator import JudgeResponder, SimulatorServer
from groundscope.types import Completion, MediaPart, MediaRef, Message, Modality, TextPart, Usage


def test_key_covers_model_url_messages_config_but_not_payloads(tmp_path: Path) -> None:
    msgs = [Message("user", "hello")]
    base = cache_key("j", "mock", msgs, {"max_tokens": 10})
    assert base == cache_key("j", "mock", msgs, {"max_tokens": 10, "temperature": 0})
    assert base != cache_key("k", "mock", msgs, {"max_tokens": 10})
    assert base != cache_key("j", "http://x/v1", msgs, {"max_tokens": 10})
    assert base != cache_key("j", "mock", msgs, {"max_tokens": 11})
    assert base != cache_key("j", "mock", [Message("system", "s"), *msgs], {"max_tokens": 10})
    # a medium enters by its description: a saved run's path-only ref hashes like the original
    img = tmp_path / "a.png"
    img.write_bytes(b"\x89PNG\r\n\x1a\n" + b"0" * 20)
    live = MediaRef(Modality.IMAGE, "a.png", base_dir=tmp_path)
    saved = MediaRef(Modality.IMAGE, "a.png")
    with_media = [Message("user", (TextPart("q"), MediaPart(live)))]
    assert cache_key("j", "mock", with_media, {}) == cache_key(
        "j", "mock", [Message("user", (TextPart("q"), MediaPart(saved)))], {})


def test_cache_file_roundtrip_torn_tail_and_corrupt_lines(tmp_path: Path) -> None:
    path = tmp_path / "cache" / "judge.jsonl"
    cache = ResponseCache(path)
    reply = Completion("{}", model="j", finish_reason="stop", usage=Usage(3, 4, 7))
    cache.put("k1", reply, model="j")
    cache.put("k2", Completion("two"), model="j")
    cache.close()
    assert ResponseCache(path).get("k1") == reply
    # a crash mid-write leaves a torn tail; a bad line in the middle is skipped
    with path.open("ab") as fh:
        fh.write(b'{"key": "k3", "completion": {"text": "tor')
    lines = path.read_bytes().split(b"\n")
    path.write_bytes(lines[0] + b"\nnot json\n" + b"\n".join(lines[1:]))
    again = ResponseCache(path)
    assert again.get("k1") == reply and again.get("k2").text == "two" and again.get("k3") is None
    again.put("k4", Completion("four"))  # the torn tail is cut before appending
    again.close()
    final = ResponseCache(path)
    assert len(final) == 3 and final.get("k4").text == "four"
    assert ResponseCache(None).get("k1") is None  # memory-only cache


def test_cached_chat_calls_once_and_coalesces(tmp_path: Path) -> None:
    judge = JudgeResponder()
    prompt = judge_prompt("What animal?", ["Dog"], "a dog")

    async def main() -> tuple[list[Completion], CachedChat, int]:
        async with SimulatorServer(responders=[judge]) as url:
            connects = 0

            async def connect() -> ChatClient:
                nonlocal connects
                connects += 1
                return ChatClient(url, "judge-1", concurrency=4)

            cache = ResponseCache(tmp_path / "judge.jsonl")
            chat = CachedChat(cache, model_id="judge-1", api_url="mock",
                              generation_config={"max_tokens": 64}, connect=connect)
            msgs = [Message("user", prompt)]
            same = await asyncio.gather(*(chat.complete(msgs) for _ in range(5)))
            again = await chat.complete(msgs)
            await chat.aclose()
            cache.close()
            return [*same, again], chat, connects

    replies, chat, connects = asyncio.run(main())
    assert judge.calls == 1 and chat.requests == 1 and chat.hits == 5 and connects == 1
    assert len({r.text for r in replies}) == 1 and '"verdict":"A"' in replies[0].text

    # a new process over the same file: no client is even built
    async def rerun() -> CachedChat:
        async def connect() -> ChatClient:
            raise AssertionError("a cached request must not connect")

        chat = CachedChat(ResponseCache(tmp_path / "judge.jsonl"), model_id="judge-1",
                          api_url="mock", generation_config={"max_tokens": 64}, connect=connect)
        await chat.complete([Message("user", prompt)])
        return chat

    assert asyncio.run(rerun()).hits == 1
