"""Media in the HTML report: thumbnails, dedup by content, the size budget, missing files."""

from __future__ import annotations

import base64
import io
import shutil
from pathlib import Path

from PIL import Image

from groundscope.report.embed import THUMB_PX, MediaTable

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
    video = table.entries[table.ref("video", "sample.mp4", MEDIA)]
    assert "blob" not in video and video["note"].endswith("not embedded")
    inline = table.entries[table.ref("image", "image:sha256:0123abcd (image/png)", None)]
    assert "blob" not in inline and inline["name"].startswith("image:sha256:")
    url = table.entries[table.ref("image", "https://example.org/x.jpg", None)]
    assert "blob" not in url  # remote media are never fetched
