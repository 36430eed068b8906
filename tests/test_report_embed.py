"""Media in the HTML report: thumbnails, dedup by content, the size budget, missing files."""

from __future__ import annotations

import base64
import io
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from groundscope.report.embed import THUMB_PX, VIDEO_CHARGE, MediaTable
from groundscope.types import MediaRef, Modality

MEDIA = Path(__file__).resolve().parents[1] / "examples" / "media"


def _big_png(path: Path, seed: int) -> Path:
    Image.effect_noise((900, 600), 40 + seed).convert("RGB").save(path, "PNG")
    return path


def test_thumbnail_is_a_small_jpeg(tmp_path: Path) -> None:
    _big_png(tmp_path / "big.png", 0)
    table = MediaTable()
    entry = table.entries[table.ref("image", "big.png", tmp_path)]
    uri = table.blobs[entry["blob"]]
    assert uri.startswith("data:image/jpeg;base64,")
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as img:
        assert max(img.size) == THUMB_PX and img.format == "JPEG"
    assert len(uri) < (tmp_path / "big.png").stat().st_size / 20  # never the full file


def test_dedup_by_content_budget_and_missing(tmp_path: Path) -> None:
    shutil.copy(MEDIA / "dog.jpg", tmp_path / "a.jpg")
    shutil.copy(MEDIA / "dog.jpg", tmp_path / "b.jpg")
    _big_png(tmp_path / "other.png", 1)
    table = MediaTable()
    a, b = (table.entries[table.ref("image", n, tmp_path)] for n in ("a.jpg", "b.jpg"))
    assert a["blob"] == b["blob"] == 0  # same bytes, one embedded copy
    table.budget = table.used  # the budget is now used up: no more previews
    other = table.entries[table.ref("image", "other.png", tmp_path)]
    assert "blob" not in other and "budget" in other["note"]
    missing = table.entries[table.ref("image", "../media/gone.jpg", tmp_path)]
    assert missing == {"kind": "image", "name": "../media/gone.jpg", "note": "file not found"}
    assert table.ref("image", "a.jpg", tmp_path) == 0 and len(table.blobs) == 1


def test_audio_video_and_inline(tmp_path: Path) -> None:
    table = MediaTable()
    wav = table.entries[table.ref("audio", "sample.wav", MEDIA)]
    assert table.blobs[wav["blob"]].startswith("data:audio/wav;base64,")
    video = table.entries[table.ref("video", "sample.mp4", MEDIA)]  # its first frame
    uri = table.blobs[video["blob"]]
    assert uri.startswith("data:image/jpeg;base64,") and "note" not in video
    assert table.used >= VIDEO_CHARGE  # its decoding is charged to the budget
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as img:
        assert max(img.size) <= THUMB_PX and img.format == "JPEG"
    inline = table.entries[table.ref("image", "image:sha256:0123abcd (image/png)", None)]
    assert "blob" not in inline and inline["name"].startswith("image:sha256:")
    url = table.entries[table.ref("image", "https://example.org/x.jpg", None)]
    assert "blob" not in url  # remote media are never fetched


def test_a_run_makes_its_page_thumbnails_ahead_in_a_background_thread(
        tmp_path: Path, monkeypatch) -> None:
    """The end-of-run page's thumbnails are made while the run waits on the model, off the
    event loop's thread; the page embeds exactly those (Pillow makes no other thumbnail)."""
    import json
    import re
    import threading

    from groundscope import run_task
    from groundscope.simulator import SimulatorServer

    made: list[str] = []
    real = Image.Image.resize  # a thumbnail's last step (media.small_image)

    def recording(self: Image.Image, *args: Any, **kwargs: Any) -> Image.Image:
        made.append(threading.current_thread().name)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "resize", recording)
    data = tmp_path / "data"
    data.mkdir()
    for i in range(5):
        _big_png(data / f"{i}.png", i)
    rows = [{"id": f"q{i}", "answer": "x", "messages": [{"role": "user", "content": [
        {"type": "text", "text": f"Question {i}?"},
        {"type": "image_url", "image_url": {"url": f"{i % 5}.png"}}]}]} for i in range(10)]
    (data / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with SimulatorServer() as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["general_vqa"],
                           "dataset_args": {"general_vqa": {"local_path": str(data)}},
                           "work_dir": str(tmp_path / "out")})
    assert made == ["groundscope-thumbnails"] * 5  # one per distinct file, none on the loop
    page = (Path(report.run_dir) / "report.html").read_text()
    assert len(set(re.findall(r"data:image/jpeg;base64,[A-Za-z0-9+/=]+", page))) == 5


def test_a_prefetched_thumbnail_is_not_used_for_a_changed_file(tmp_path: Path) -> None:
    from groundscope.report import embed

    path = _big_png(tmp_path / "a.png", 1)
    prefetch = embed.ThumbnailPrefetch()
    prefetch.offer(MediaRef(Modality.IMAGE, "a.png", base_dir=tmp_path))
    prefetch.close()
    old = path.read_bytes()
    assert embed._prefetched(path, old) == embed._thumbnail_uri(old)
    _big_png(path, 2)  # new content, size and mtime
    assert embed._prefetched(path, path.read_bytes()) is None


def test_a_video_thumbnail_is_bounded_and_without_pyav_the_path(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import contextvars

    from groundscope import media

    def over_the_cap() -> dict[str, Any]:
        media.set_max_pixels(100)  # a 10x10 frame at most: the sample's frames are refused
        table = MediaTable()
        return table.entries[table.ref("video", "sample.mp4", MEDIA)]

    capped = contextvars.copy_context().run(over_the_cap)
    assert "blob" not in capped and capped["note"] == "not a readable video"
    monkeypatch.setitem(sys.modules, "av", None)  # import av: ImportError
    table = MediaTable()
    video = table.entries[table.ref("video", "sample.mp4", MEDIA)]
    assert "blob" not in video and video["note"].endswith("no PyAV for a thumbnail")
    assert video["name"] == "sample.mp4"  # the page shows it by its path
