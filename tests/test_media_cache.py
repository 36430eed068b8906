"""The encoded-media cache: a shared image is encoded once; nothing else keeps a payload."""

from __future__ import annotations

import gc
import json
import tracemalloc
from pathlib import Path

import pytest
from PIL import Image

from groundscope import run_task
from groundscope.media import wire
from groundscope.simulator import SimReply, SimRequest, SimulatorServer
from groundscope.types import MediaRef, Modality

pytestmark = pytest.mark.usefixtures("tmp_media_root")  # media named by tmp_path paths


def noisy_jpeg(path: Path, seed: int) -> Path:
    Image.effect_noise((160, 160), 60 + seed).convert("RGB").save(path, "JPEG", quality=95)
    return path


@pytest.fixture
def fresh_cache():
    limit = wire.CACHE.limit
    wire.CACHE.clear()
    yield wire.CACHE
    wire.set_cache_limit(limit)


def write_dataset(root: Path, images: list[str], n: int) -> None:
    rows = [{"id": f"s{i}", "answer": "x", "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"question {i}"},
        {"type": "image_url", "image_url": {"url": images[i % len(images)]}}]}]}
        for i in range(n)]
    (root / "data.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def always_x(req: SimRequest) -> SimReply:
    return SimReply("x")


def test_shared_image_is_encoded_once(tmp_path: Path, fresh_cache) -> None:
    noisy_jpeg(tmp_path / "shared.jpg", 0)
    write_dataset(tmp_path, ["shared.jpg"], 40)
    with SimulatorServer(responders=[always_x], keep_bodies=True) as url:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": {"general_vqa": {"local_path": str(tmp_path)}},
                  "work_dir": str(tmp_path / "out"), "eval_batch_size": 8})
    assert fresh_cache.encoded == 1
    assert fresh_cache.hits == 39


def test_a_changed_file_is_encoded_again(tmp_path: Path, fresh_cache) -> None:
    path = noisy_jpeg(tmp_path / "a.jpg", 1)
    ref = MediaRef(Modality.IMAGE, str(path))
    first = wire.wire_part(ref)["image_url"]["url"]
    assert wire.wire_part(ref)["image_url"]["url"] is first  # served from the cache
    noisy_jpeg(path, 7)  # new content (and size / mtime)
    second = wire.wire_part(ref)["image_url"]["url"]
    assert second != first
    assert fresh_cache.encoded == 2


def test_no_payload_is_kept_after_requests_complete(tmp_path: Path, fresh_cache) -> None:
    wire.set_cache_limit(0)
    names = [noisy_jpeg(tmp_path / f"{i}.jpg", i).name for i in range(30)]
    payload_bytes = sum((tmp_path / n).stat().st_size for n in names) * 4 // 3
    write_dataset(tmp_path, names, 30)
    cfg = {"model": "m", "datasets": ["general_vqa"],
           "dataset_args": {"general_vqa": {"local_path": str(tmp_path)}},
           "work_dir": str(tmp_path / "out"), "eval_batch_size": 4}
    with SimulatorServer(responders=[always_x]) as url:
        run_task({**cfg, "api_url": url})  # warm-up: imports, tokenizers, caches
        tracemalloc.start()
        try:
            run_task({**cfg, "api_url": url, "work_dir": str(tmp_path / "out2")})
            gc.collect()
            snapshot = tracemalloc.take_snapshot()
        finally:
            tracemalloc.stop()
    assert fresh_cache.encoded == 60 and fresh_cache.size == 0
    # Payloads are made in media/wire.py, put in a body in client/openai.py and serialised in
    # client/chat.py: nothing allocated there survives the run, while 30 payloads (~1 MB)
    # went through.
    where = [tracemalloc.Filter(True, "*groundscope/media/wire.py"),
             tracemalloc.Filter(True, "*groundscope/client/openai.py"),
             tracemalloc.Filter(True, "*groundscope/client/chat.py")]
    kept = sum(stat.size for stat in snapshot.filter_traces(where).statistics("filename"))
    assert payload_bytes > 500_000
    assert kept < 4096, kept


def test_distinct_images_stay_out_of_the_lru(tmp_path: Path, fresh_cache) -> None:
    """Files seen once wait on probation (the last few payloads) and never fill the LRU;
    a file seen again after leaving probation is admitted on its second encoding."""
    refs = [MediaRef(Modality.IMAGE, str(noisy_jpeg(tmp_path / f"{i}.jpg", i))) for i in range(12)]
    sizes = [len(wire.wire_part(r)["image_url"]["url"]) for r in refs]
    assert fresh_cache.encoded == 12 and fresh_cache.hits == 0
    assert fresh_cache.size == sum(sizes[-4:])  # only the probation list holds payloads
    assert fresh_cache._items == {}
    first = wire.wire_part(refs[0])["image_url"]["url"]  # long gone from probation: encoded again
    assert fresh_cache.encoded == 13
    assert wire.wire_part(refs[0])["image_url"]["url"] is first  # now in the LRU
    assert fresh_cache.hits == 1
    last = refs[-1]
    wire.wire_part(last)  # still on probation: a hit, and admitted
    assert fresh_cache.encoded == 13 and fresh_cache.hits == 2
    assert len(fresh_cache._items) == 2
