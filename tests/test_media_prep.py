"""Media the endpoint accepts (issue 14 item 3): video as frames, downscaled images, audio
as wav, and the request hash that follows the settings.

Every video here is real (PyAV-encoded, one colour per frame: ``video_fixtures.py``), and
what reaches the simulator's wire is decoded back to tell which frames were sent.
"""

from __future__ import annotations

import base64
import io
import json
import wave
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from groundscope import run_task
from groundscope.simulator import JudgeResponder, SimulatorServer
from media_fixtures import write_jsonl
from video_fixtures import COLOURS, audio_bytes, clip_bytes

pytest.importorskip("av")

FRAME_COUNT = 8


def _colour(url: str) -> tuple[int, int, int]:
    """The colour of a sent frame (its centre pixel, rounded to the nearest primary)."""
    raw = base64.b64decode(url.split(",", 1)[1])
    assert raw[:3] == b"\xff\xd8\xff"  # JPEG
    px = Image.open(io.BytesIO(raw)).convert("RGB").getpixel((8, 8))
    return tuple(255 if c > 127 else 0 for c in px)  # type: ignore[return-value]


def _user_parts(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for m in body["messages"] if isinstance(m["content"], list) for p in m["content"]]


def _video_dataset(root: Path, clips: dict[str, list[tuple[int, int, int]]]) -> dict[str, Any]:
    data = root / "data"
    data.mkdir()
    records = []
    for name, colours in clips.items():
        (data / f"{name}.mp4").write_bytes(clip_bytes(colours))
        records.append({"id": name, "messages": [{"role": "user", "content":
                        f"Clip {name}: <video 1> What colours?"}],
                        "video_1": f"{name}.mp4", "answer": "colours"})
    write_jsonl(data / "clips.jsonl", records)
    return {"general_vqa": {"local_path": str(data), "subset_list": ["clips"]}}


def _model_bodies(bodies: list[dict[str, Any]], clip: str) -> list[dict[str, Any]]:
    return [b for b in bodies if f"Clip {clip}:" in json.dumps(b)]


def test_video_frames_reach_the_wire_as_image_parts_in_order(tmp_path: Path) -> None:
    args = _video_dataset(tmp_path, {"fwd": COLOURS, "rev": COLOURS[::-1]})
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": args, "work_dir": str(tmp_path / "out"),
                  "video_frames": FRAME_COUNT})
        bodies = server.bodies()
    finally:
        server.stop()
    for clip, colours in (("fwd", COLOURS), ("rev", COLOURS[::-1])):
        (body,) = _model_bodies(bodies, clip)
        parts = _user_parts(body)
        assert [p["type"] for p in parts] == ["text"] + ["image_url"] * FRAME_COUNT + ["text"]
        assert [_colour(p["image_url"]["url"]) for p in parts[1:-1]] == colours


@pytest.mark.parametrize(("api", "kind"), [("anthropic_api", "image"),
                                           ("openai_responses_api", "input_image")])
def test_video_frames_let_apis_without_video_take_it(tmp_path: Path, api: str, kind: str) -> None:
    """The Messages and Responses APIs have no video part: as frames, a video is images."""
    args = _video_dataset(tmp_path, {"fwd": COLOURS})
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "api_key": "sk-test", "eval_type": api,
                  "datasets": ["general_vqa"], "dataset_args": args,
                  "work_dir": str(tmp_path / "out"), "video_frames": FRAME_COUNT})
        (body,) = server.bodies()
    finally:
        server.stop()
    blocks = body.get("messages") or body.get("input")
    parts = [p for m in blocks for p in m["content"] if isinstance(m["content"], list)]
    images = [p for p in parts if p["type"] == kind]
    urls = [p["image_url"] if kind == "input_image" else
            f"data:{p['source']['media_type']};base64,{p['source']['data']}" for p in images]
    assert [_colour(u) for u in urls] == COLOURS


def test_video_fps_bounds_the_frame_count(tmp_path: Path) -> None:
    """8 colours at 8 fps last 1 s: video_fps 4 samples 4 frames, at 0.125, 0.375, 0.625 and
    0.875 s (the middles of 4 spans): colours 1, 3, 5, 7."""
    args = _video_dataset(tmp_path, {"fwd": COLOURS})
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": args, "work_dir": str(tmp_path / "out"),
                  "video_frames": FRAME_COUNT, "video_fps": 4})
        (body,) = server.bodies()
    finally:
        server.stop()
    images = [p for p in _user_parts(body) if p["type"] == "image_url"]
    assert [_colour(p["image_url"]["url"]) for p in images] == COLOURS[1::2]


def test_judge_sees_the_same_frames_and_each_clip_is_decoded_once(tmp_path: Path) -> None:
    from groundscope.client.mediaprep import PREPARED

    args = _video_dataset(tmp_path, {"fwd": COLOURS, "rev": COLOURS[::-1], "mid": COLOURS[2:6]})
    PREPARED.clear()
    judge_server = SimulatorServer(responders=[JudgeResponder()], keep_bodies=True)
    server = SimulatorServer(keep_bodies=True)
    url, judge_url = server.start(), judge_server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": args, "work_dir": str(tmp_path / "out"), "repeats": 2,
                  "video_frames": FRAME_COUNT,
                  "judge": {"strategy": "llm", "multimodal": True,
                            "models": {"model_id": "j", "api_url": judge_url}}})
        model_bodies, judge_bodies = server.bodies(), judge_server.bodies()
    finally:
        server.stop()
        judge_server.stop()
    assert PREPARED.conversions["video"] == 3  # 3 clips, 2 repeats, a judge call each
    for clip in ("fwd", "rev", "mid"):
        sent = {tuple(p["image_url"]["url"] for p in _user_parts(b) if p["type"] == "image_url")
                for b in _model_bodies(model_bodies, clip)}
        judged = {tuple(p["image_url"]["url"] for p in _user_parts(b) if p["type"] == "image_url")
                  for b in _model_bodies(judge_bodies, clip)}
        assert len(sent) == 1 and judged == sent
        assert len(next(iter(sent))) == FRAME_COUNT


def test_grounding_verification_requests_carry_the_frames(tmp_path: Path) -> None:
    """A claim is verified against the video's frames (the request every client sends is
    prepared the same way: ``ChatClient.complete`` -> ``prepare_messages``)."""
    import asyncio

    from groundscope.client.mediaprep import prepare_messages
    from groundscope.media import MediaSettings, media_roots_in_force, set_media_settings
    from groundscope.scoring.grounding_prompt import verify_messages
    from groundscope.types import MediaPart, MediaRef, Modality, TextPart

    clip = tmp_path / "c.mp4"
    clip.write_bytes(clip_bytes())
    with media_roots_in_force([tmp_path]):
        set_media_settings(MediaSettings(video_frames=FRAME_COUNT))
        try:
            (msg,) = asyncio.run(prepare_messages(verify_messages(
                "The clip is red.", [MediaRef(Modality.VIDEO, str(clip))])))
        finally:
            set_media_settings(MediaSettings())
    assert isinstance(msg.content, tuple) and isinstance(msg.content[0], TextPart)
    frames = [p.media for p in msg.content[1:] if isinstance(p, MediaPart)]
    assert len(frames) == len(msg.content) - 1 == FRAME_COUNT
    assert all(f.kind is Modality.IMAGE and isinstance(f.source, bytes) for f in frames)
    colours = [_colour("data:image/jpeg;base64," + base64.b64encode(f.source).decode())
               for f in frames if isinstance(f.source, bytes)]
    assert colours == COLOURS


def test_frames_keep_to_max_image_bytes(tmp_path: Path) -> None:
    import av
    import numpy as np

    from groundscope.media import MediaSettings, media_roots_in_force, prepare_ref, set_media_settings
    from groundscope.types import MediaRef, Modality

    out = io.BytesIO()  # 4 frames of noise: a frame's JPEG is far over the budget
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("mpeg4", rate=4)
        stream.width, stream.height, stream.pix_fmt = 640, 480, "yuv420p"
        rng = np.random.default_rng(0)
        for _ in range(4):
            rgb = rng.integers(0, 255, (480, 640, 3), np.uint8)
            for packet in stream.encode(av.VideoFrame.from_ndarray(rgb, format="rgb24")):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    clip = tmp_path / "noise.mp4"
    clip.write_bytes(out.getvalue())
    with media_roots_in_force([tmp_path]):
        for budget in (None, 30_000):
            set_media_settings(MediaSettings(video_frames=4, max_image_bytes=budget))
            try:
                frames = prepare_ref(MediaRef(Modality.VIDEO, str(clip)))
            finally:
                set_media_settings(MediaSettings())
            sizes = [len(f.source) for f in frames if isinstance(f.source, bytes)]
            assert len(sizes) == 4
            assert max(sizes) > 30_000 if budget is None else max(sizes) <= budget


def test_changed_video_frames_is_not_reused_on_resume(tmp_path: Path) -> None:
    """The request hash carries the frame settings: a resumed run with another N asks again."""
    args = _video_dataset(tmp_path, {"fwd": COLOURS})
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    base = {"model": "m", "api_url": url, "datasets": ["general_vqa"], "dataset_args": args,
            "work_dir": str(tmp_path / "out"), "no_timestamp": True}
    try:
        run_task({**base, "video_frames": 4})
        run_task({**base, "video_frames": 4, "use_cache": str(tmp_path / "out")})
        assert len(server.bodies()) == 1  # same settings: reused
        run_task({**base, "video_frames": 2, "use_cache": str(tmp_path / "out")})
        bodies = server.bodies()
    finally:
        server.stop()
    assert len(bodies) == 2
    assert sum(p["type"] == "image_url" for p in _user_parts(bodies[-1])) == 2


# ---------------------------------------------------------------- images


def _image_dataset(root: Path, images: dict[str, bytes]) -> dict[str, Any]:
    data = root / "data"
    data.mkdir()
    records = []
    for name, raw in images.items():
        (data / name).write_bytes(raw)
        records.append({"id": name, "messages": [{"role": "user", "content":
                        f"Image {name}: <image 1>"}], "image_1": name, "answer": "x"})
    write_jsonl(data / "imgs.jsonl", records)
    return {"general_vqa": {"local_path": str(data), "subset_list": ["imgs"]}}


def _encoded(img: Image.Image, fmt: str, **options: Any) -> bytes:
    out = io.BytesIO()
    img.save(out, format=fmt, **options)
    return out.getvalue()


def _sent_images(tmp_path: Path, images: dict[str, bytes], **settings: Any) -> dict[str, Any]:
    args = _image_dataset(tmp_path, images)
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": args, "work_dir": str(tmp_path / "out"),
                           "no_timestamp": True, **settings})
        bodies = server.bodies()
    finally:
        server.stop()
    out: dict[str, Any] = {"report": report}
    for name in images:
        for b in bodies:
            if f"Image {name}:" in json.dumps(b):
                (part,) = [p for p in _user_parts(b) if p["type"] == "image_url"]
                out[name] = base64.b64decode(part["image_url"]["url"].split(",", 1)[1])
    return out


def test_max_image_side_downscales_keeping_format_and_alpha(tmp_path: Path) -> None:
    rgba = Image.new("RGBA", (800, 400), (10, 200, 30, 77))
    images = {"wide.png": _encoded(rgba, "PNG"),
              "tall.jpg": _encoded(Image.new("RGB", (300, 900), "navy"), "JPEG"),
              "webp.webp": _encoded(rgba, "WEBP"),
              "small.jpg": _encoded(Image.new("RGB", (100, 80), "red"), "JPEG")}
    sent = _sent_images(tmp_path, images, max_image_side=256)
    wide = Image.open(io.BytesIO(sent["wide.png"]))
    assert (wide.format, wide.size, wide.mode) == ("PNG", (256, 128), "RGBA")
    assert wide.getpixel((5, 5))[3] == 77  # alpha kept
    tall = Image.open(io.BytesIO(sent["tall.jpg"]))
    assert (tall.format, tall.size) == ("JPEG", (85, 256))
    webp = Image.open(io.BytesIO(sent["webp.webp"]))
    assert (webp.format, webp.size, webp.mode) == ("WEBP", (256, 128), "RGBA")
    assert sent["small.jpg"] == images["small.jpg"]  # within the limit: sent byte for byte


def test_max_image_bytes_steps_jpeg_quality_down(tmp_path: Path) -> None:
    import numpy as np

    noise = Image.fromarray(np.random.default_rng(0).integers(0, 255, (600, 600, 3), np.uint8))
    raw = _encoded(noise, "JPEG", quality=95)
    assert len(raw) > 200_000
    sent = _sent_images(tmp_path, {"noise.jpg": raw}, max_image_bytes=100_000)
    got = Image.open(io.BytesIO(sent["noise.jpg"]))
    assert got.format == "JPEG" and len(sent["noise.jpg"]) <= 100_000


def test_image_that_cannot_fit_is_a_bad_sample_with_a_clear_message(tmp_path: Path) -> None:
    import numpy as np

    noise = Image.fromarray(np.random.default_rng(1).integers(0, 255, (400, 400, 4), np.uint8))
    raw = _encoded(noise, "PNG")  # lossless noise: over 1 KiB at any side a model can use
    sent = _sent_images(tmp_path, {"noise.png": raw, "ok.jpg": _encoded(
        Image.new("RGB", (32, 32), "red"), "JPEG")}, max_image_bytes=1024, ignore_errors=True)
    assert "noise.png" not in sent and "ok.jpg" in sent
    rows = [json.loads(line) for p in (tmp_path / "out").glob("predictions/*/*.jsonl")
            for line in p.read_text().splitlines()]
    (bad,) = [r for r in rows if r["status"] != "ok"]
    assert bad["error_kind"] == "media"
    assert bad["error"].startswith("noise.png: image cannot fit in max_image_bytes=1024: still ")
    assert "\n" not in bad["error"]


def test_changed_image_side_is_not_reused_on_resume(tmp_path: Path) -> None:
    from groundscope.client.openai import request_hash
    from groundscope.media import MediaSettings, set_media_settings
    from groundscope.types import MediaPart, MediaRef, Message, Modality

    path = tmp_path / "a.png"
    path.write_bytes(_encoded(Image.new("RGB", (300, 300)), "PNG"))
    image = (Message("user", (MediaPart(MediaRef(Modality.IMAGE, str(path))),)),)
    text = (Message("user", "no media"),)
    hashes = []
    for side in (None, 128, 256):
        set_media_settings(MediaSettings(max_image_side=side))
        hashes.append((request_hash(image, "m", {}), request_hash(text, "m", {})))
    set_media_settings(MediaSettings())
    assert len({h[0] for h in hashes}) == 3  # each side its own request
    assert len({h[1] for h in hashes}) == 1  # a request without images is unchanged


def test_judge_cache_key_follows_the_video_settings(tmp_path: Path) -> None:
    """A judge reply cached for the video itself is not reused for its frames (nor for
    another frame count): the disk cache key carries the settings that changed the media."""
    from groundscope.client.cache import cache_key
    from groundscope.media import MediaSettings, set_media_settings
    from groundscope.types import MediaPart, MediaRef, Message, Modality

    clip = tmp_path / "c.mp4"
    clip.write_bytes(clip_bytes())
    video = (Message("user", (MediaPart(MediaRef(Modality.VIDEO, str(clip))),)),)
    keys = set()
    for frames in (0, 4, 8):
        set_media_settings(MediaSettings(video_frames=frames))
        keys.add(cache_key("judge", "mock", video, {}))
    set_media_settings(MediaSettings())
    assert len(keys) == 3


# ---------------------------------------------------------------- audio


@pytest.mark.parametrize(("name", "fmt", "codec"), [("a.flac", "flac", "flac"),
                                                    ("a.ogg", "ogg", "libopus"),
                                                    ("a.m4a", "ipod", "aac")])
def test_audio_transcode_sends_valid_wav(tmp_path: Path, name: str, fmt: str, codec: str) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / name).write_bytes(audio_bytes(fmt, codec, rate=48_000))
    write_jsonl(data / "aud.jsonl", [{"messages": [{"role": "user", "content": "Hear <audio 1>"}],
                                      "audio_1": name, "answer": "tone"}])
    server = SimulatorServer(keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                  "dataset_args": {"general_vqa": {"local_path": str(data), "subset_list": ["aud"]}},
                  "work_dir": str(tmp_path / "out"), "audio_transcode": True})
        (body,) = server.bodies()
    finally:
        server.stop()
    (part,) = [p for p in _user_parts(body) if p["type"] == "input_audio"]
    assert part["input_audio"]["format"] == "wav"
    with wave.open(io.BytesIO(base64.b64decode(part["input_audio"]["data"]))) as wav:
        assert (wav.getnchannels(), wav.getsampwidth(), wav.getframerate()) == (1, 2, 16_000)
        assert 7_000 < wav.getnframes() < 10_000  # 0.5 s, plus codec priming


def test_audio_transcode_defaults_by_eval_type() -> None:
    from groundscope.config import TaskConfig

    base = {"model": "m", "datasets": ["general_vqa"], "api_url": "http://127.0.0.1:9/v1"}
    assert TaskConfig(**base, eval_type="openai_api").media_settings().audio_transcode
    assert not TaskConfig(**base, eval_type="anthropic_api").media_settings().audio_transcode
    assert not TaskConfig(**base, eval_type="mock").media_settings().audio_transcode
    assert not TaskConfig(**base, eval_type="openai_api",
                          audio_transcode=False).media_settings().audio_transcode


def test_downscaled_exif_rotated_jpeg_keeps_its_upright_orientation(tmp_path: Path) -> None:
    """A phone JPEG stored sideways with EXIF Orientation 6 (shown rotated 90 degrees): the
    downscaled copy drops the EXIF block, so its pixels must be turned upright first."""
    stored = Image.new("RGB", (800, 400), "red")
    stored.paste((0, 0, 255), (0, 0, 400, 400))  # left half blue as stored
    exif = Image.Exif()
    exif[0x0112] = 6
    raw = _encoded(stored, "JPEG", exif=exif.tobytes())
    sent = _sent_images(tmp_path, {"phone.jpg": raw}, max_image_side=200)
    got = Image.open(io.BytesIO(sent["phone.jpg"]))
    assert got.getexif().get(0x0112, 1) == 1
    assert got.size == (100, 200)  # upright: taller than wide, as a viewer shows it
    top, bottom = got.convert("RGB").getpixel((50, 20)), got.convert("RGB").getpixel((50, 180))
    assert top[2] > 200 and bottom[0] > 200  # the stored left (blue) is on top once turned


def test_the_same_dataset_copied_to_another_folder_reads_its_own_media(tmp_path: Path) -> None:
    """Two runs in one process over copies of one dataset in two folders: the second sends
    its own files. The prepared-media cache was keyed by the media's content and name as
    written, so the second run was handed the first folder's refs (outside its roots)."""
    import shutil

    examples = Path(__file__).resolve().parents[1] / "examples"
    reports = []
    with SimulatorServer() as url:
        for name in ("first", "second"):
            root = tmp_path / name
            shutil.copytree(examples / "vqa", root / "vqa")
            shutil.copytree(examples / "media", root / "media")
            reports.append(run_task({
                "model": "m", "api_url": url, "datasets": ["general_vqa"],
                "dataset_args": {"general_vqa": {"local_path": str(root / "vqa"),
                                                 "subset_list": ["example_openai"]}},
                "media_roots": [str(root / "media")], "work_dir": str(root / "out")}))
            shutil.rmtree(root / "media")  # gone: the next run must not read it
    for report in reports:
        summary = report.dataset("general_vqa").summary
        assert summary.errored == 0 and summary.succeeded == summary.requested > 0
