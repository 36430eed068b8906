"""Hostile videos under ``--video-frames`` (corpus: ``tests/untrusted/video/make_corpus.py``):
each is a bad sample or a bad record with one line naming the file, never a crash, and
decoding stays bounded (pixels, frames decoded, frames per seek). Without PyAV the flag is
refused before any request with one line saying how to install it."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from groundscope import run_task
from groundscope.errors import ConfigError, MediaError
from groundscope.simulator import SimulatorServer
from media_fixtures import write_jsonl
from untrusted.video.make_corpus import make
from video_fixtures import COLOURS, clip_bytes

pytest.importorskip("av")

def _decode() -> Any:
    from groundscope.media import decode  # imported here: the tests collect on older code

    return decode


HOSTILE = {  # file -> how its one-line error starts, after the path
    "corrupt.mp4": ": not a readable media file (Invalid data found when processing input)",
    "truncated.mp4": ": no video stream",
    "no_frames.avi": ": video has no duration (no frames?)",
}


def _rows(out: Path, pattern: str) -> list[dict[str, object]]:
    return [json.loads(line) for p in out.glob(pattern) for line in p.read_text().splitlines()]


def test_hostile_videos_are_bad_records_with_one_line(tmp_path: Path) -> None:
    """A video frames cannot be sampled from is found at load, as audio to convert is: a
    skipped record naming file:line: field, and the run (no --ignore-errors) goes on."""
    files = make(tmp_path / "data")
    names = ["good.mp4", *HOSTILE, "png_named.mp4"]
    write_jsonl(tmp_path / "data" / "v.jsonl", [
        {"id": n, "messages": [{"role": "user", "content": "<video 1>"}], "video_1": n,
         "answer": "x"} for n in names])
    with SimulatorServer() as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(files["good.mp4"]
                                                                             .parent),
                                                            "subset_list": ["v"]}},
                           "work_dir": str(tmp_path / "out"), "video_frames": 8,
                           "no_timestamp": True})
    summary = report.dataset("general_vqa").summary
    assert (summary.succeeded, summary.errored) == (1, 0)
    preds = {r["sample_id"]: r for r in _rows(tmp_path / "out", "predictions/*/*.jsonl")}
    assert list(preds) == ["good.mp4"] and preds["good.mp4"]["status"] == "ok"
    skipped = {str(r): r for r in _rows(tmp_path / "out", "skipped.jsonl")}
    assert len(skipped) == len(HOSTILE) + 1
    text = "\n".join(skipped)
    for line, name in enumerate(names[1:-1], start=2):
        problem = HOSTILE[name]
        assert f"v.jsonl:{line}: video_1: {name}{problem}" in text, name
    assert "png_named.mp4: not a video file (its bytes are image/png)" in text


def test_png_bytes_are_not_decoded_as_a_video() -> None:
    """FFmpeg opens a PNG as a one-frame ``png_pipe`` "video": refused by name."""
    decode = _decode()
    out = io.BytesIO()
    Image.new("RGB", (8, 8)).save(out, "PNG")
    with pytest.raises(MediaError, match=r"^x\.mp4: not a video \(its bytes are a single image: "
                                         r"png_pipe\)$"):
        decode.sample_frames(out.getvalue(), "x.mp4", count=8, fps=None, max_pixels=10**6,
                             side=64)


def test_frames_over_the_pixel_cap_are_refused_before_decoding() -> None:
    decode = _decode()
    with pytest.raises(MediaError, match=r"^v: video frames of 64x48 = 3072 pixels are over the "
                                         r"limit of 1000 \(max_image_pixels\)$"):
        decode.sample_frames(clip_bytes(), "v", count=8, fps=None, max_pixels=1000, side=64)


def test_frames_decoded_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    decode = _decode()
    monkeypatch.setattr(decode, "MAX_DECODED_FRAMES", 20)
    data = clip_bytes(COLOURS, repeat=3)  # 24 frames: the last target is past frame 20
    with pytest.raises(MediaError, match=r"^v: more than 20 frames to decode$"):
        decode.sample_frames(data, "v", count=8, fps=None, max_pixels=10**6, side=64)


def test_a_long_video_is_sampled_by_seeking_within_bounds(tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    decode = _decode()
    data = make(tmp_path)["long_gop.mp4"].read_bytes()  # 700 frames at 25 fps, one keyframe
    frames = decode.sample_frames(data, "v", count=8, fps=None, max_pixels=10**6, side=64)
    shown = [Image.open(io.BytesIO(f)).convert("RGB").getpixel((8, 8)) for f in frames]
    assert [tuple(255 if c > 127 else 0 for c in px) for px in shown] == COLOURS
    monkeypatch.setattr(decode, "SEEK_MAX_FRAMES", 50)
    with pytest.raises(MediaError, match=r"^v: more than 50 frames between keyframes$"):
        decode.sample_frames(data, "v", count=8, fps=None, max_pixels=10**6, side=64)


def test_without_pyav_video_frames_is_a_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from groundscope.config import TaskConfig

    decode = _decode()
    clip = clip_bytes()
    monkeypatch.setitem(sys.modules, "av", None)  # import av: ImportError
    with pytest.raises(ConfigError, match=r"^video_frames: needs PyAV, which is not installed: "
                                          r"pip install -e '\.\[video\]' in the groundscope clone \(PyAV\)$"):
        TaskConfig(model="m", datasets=["general_vqa"], eval_type="mock", video_frames=8)
    with pytest.raises(MediaError, match=r"needs PyAV: pip install -e '\.\[video\]'"):
        decode.sample_frames(clip, "v", count=8, fps=None, max_pixels=10**6, side=64)


def test_without_pyav_the_cli_says_how_to_install_and_exits_2(tmp_path: Path) -> None:
    code = ("import sys; sys.modules['av'] = None; from groundscope.cli import entry; "
            "sys.argv = ['groundscope', 'eval', '--model', 'm', '--eval-type', 'mock', "
            "'--datasets', 'general_vqa', '--video-frames', '8']; sys.exit(entry())")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "groundscope: error: video_frames: needs PyAV, which is not installed: "
        "pip install -e '.[video]' in the groundscope clone (PyAV)"]


def test_audio_to_convert_must_decode_at_load(tmp_path: Path) -> None:
    """Under audio_transcode a flac is a record's medium only if it decodes: junk behind a
    flac head is a bad record found before any request, not a failed request."""
    from groundscope import media
    from groundscope.types import MediaRef, Modality
    from video_fixtures import audio_bytes

    junk = tmp_path / "junk.flac"
    junk.write_bytes(b"fLaC" + bytes(60))
    good = tmp_path / "good.flac"
    good.write_bytes(audio_bytes("flac", "flac"))
    with media.media_roots_in_force([tmp_path]):
        media.set_media_settings(media.MediaSettings(audio_transcode=True))
        try:
            media.check(MediaRef(Modality.AUDIO, str(good)), decode=False)
            with pytest.raises(MediaError, match=r"junk\.flac: not a readable media file \("):
                media.check(MediaRef(Modality.AUDIO, str(junk)), decode=False)
        finally:
            media.set_media_settings(media.MediaSettings())
        with pytest.raises(MediaError, match=r"unsupported audio format 'flac'"):
            media.check(MediaRef(Modality.AUDIO, str(good)), decode=False)  # not converted


def _silent_flac(path: Path, minutes: int, rate: int = 8000) -> None:
    import av
    import numpy as np

    with av.open(str(path), "w", format="flac") as container:
        stream = container.add_stream("flac", rate=rate)
        stream.layout = "mono"
        chunk = np.zeros((1, rate * 60), np.int16)
        for minute in range(minutes):
            frame = av.AudioFrame.from_ndarray(chunk, format="s16", layout="mono")
            frame.rate, frame.pts = rate, minute * rate * 60
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def test_audio_too_long_to_convert_is_a_bad_record_at_load(tmp_path: Path) -> None:
    """A 40-minute flac (1 MB) is over the wav budget once converted (16 kHz 16-bit: 77 MB):
    found at load from its header's duration, a skipped record naming file:line: field, not
    a failed sample that stops the run after decoding it."""
    data = tmp_path / "data"
    data.mkdir()
    _silent_flac(data / "long.flac", 40)
    (data / "good.mp4").write_bytes(clip_bytes(COLOURS))
    write_jsonl(data / "a.jsonl", [
        {"id": "long", "messages": [{"role": "user", "content": "<audio 1>"}],
         "audio_1": "long.flac", "answer": "x"},
        {"id": "good", "messages": [{"role": "user", "content": "<video 1>"}],
         "video_1": "good.mp4", "answer": "x"}])
    with SimulatorServer() as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(data),
                                                            "subset_list": ["a"]}},
                           "work_dir": str(tmp_path / "out"), "video_frames": 4,
                           "audio_transcode": True, "no_timestamp": True})
    summary = report.dataset("general_vqa").summary
    assert (summary.succeeded, summary.errored) == (1, 0)
    (skipped,) = _rows(tmp_path / "out", "skipped.jsonl")
    assert "a.jsonl:1: audio_1: long.flac: audio of 2400 s is over 67108864 bytes as wav" in str(
        skipped)
