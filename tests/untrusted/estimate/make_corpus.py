"""Writes the dry-run estimate's hostile dataset (``python make_corpus.py OUT_DIR``, or call
:func:`hostile` from tests/test_untrusted_estimate.py). One General-VQA subset, ``mixed.jsonl``:

- good records: a text question, a 640x480 PNG, a WAV whose header declares a data chunk of
  0xFFFFFFFF bytes (a streamed WAV: its length must come from the file's size), a remote
  image URL (never fetched: counted at a default size), a video;
- bad records, each skipped by a run: a line that is not JSON, a JSON array, a missing
  image, an image outside the media roots, an empty image file, a PNG header declaring
  60000x60000 pixels (over the pixel cap), a record id seen before (a duplicate);
- a PNG cut after its header (no pixel is decodable; its header is all the estimate reads).
"""

from __future__ import annotations

import io
import json
import struct
import sys
import zlib
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[3]
MP4 = ROOT / "examples" / "media" / "sample.mp4"

GOOD = 6  # samples a run asks
BAD = 6  # records a run skips as bad (the duplicate id is counted apart)
DUPLICATES = 1


def _png(width: int, height: int) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", (width, height), "white").save(buffer, format="PNG")
    return buffer.getvalue()


def _png_header(width: int, height: int) -> bytes:
    """A PNG signature and IHDR declaring ``width`` x ``height``, then nothing."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = b"IHDR" + ihdr
    return (b"\x89PNG\r\n\x1a\n" + struct.pack(">I", len(ihdr)) + chunk
            + struct.pack(">I", zlib.crc32(chunk) & 0xFFFFFFFF))


def _streamed_wav(seconds: float, rate: int = 8000) -> bytes:
    """A 16-bit mono WAV whose RIFF and data sizes say 0xFFFFFFFF (as a stream writes it)."""
    fmt = struct.pack("<HHIIHH", 1, 1, rate, rate * 2, 2, 16)
    data = b"\x00\x01" * int(seconds * rate)
    return (b"RIFF" + b"\xff\xff\xff\xff" + b"WAVE" + b"fmt " + struct.pack("<I", 16) + fmt
            + b"data" + b"\xff\xff\xff\xff" + data)


def _ask(rid: str, *parts: dict[str, object]) -> dict[str, object]:
    content = [{"type": "text", "text": f"What is in {rid}?"}, *parts]
    return {"id": rid, "answer": "something", "messages": [{"role": "user", "content": content}]}


def _image(url: str, **extra: str) -> dict[str, object]:
    return {"type": "image_url", "image_url": {"url": url, **extra}}


def hostile(out: Path) -> Path:
    """The dataset directory (``mixed.jsonl`` and its media); see the module docstring."""
    data = out / "estimate"
    data.mkdir(parents=True, exist_ok=True)
    (data / "wide.png").write_bytes(_png(640, 480))
    (data / "cut.png").write_bytes(_png(1500, 900)[:100])
    (data / "stream.wav").write_bytes(_streamed_wav(2.0))
    (data / "empty.png").write_bytes(b"")
    (data / "bomb.png").write_bytes(_png_header(60_000, 60_000))
    (data / "clip.mp4").write_bytes(MP4.read_bytes())
    outside = out / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.png").write_bytes(_png(8, 8))
    good = [
        {"id": "text", "answer": "a", "messages": [{"role": "user", "content": "Say a."}]},
        _ask("wide", _image("wide.png", detail="high")),
        _ask("cut", _image("cut.png")),
        _ask("stream", {"type": "input_audio", "input_audio": {"data": "stream.wav",
                                                               "format": "wav"}}),
        _ask("remote", _image("https://example.invalid/x.png")),
        _ask("clip", {"type": "video_url", "video_url": {"url": "clip.mp4"}}),
    ]
    lines = [json.dumps(r) for r in good] + [
        "{not json",
        "[1, 2, 3]",
        json.dumps(_ask("missing", _image("nowhere.png"))),
        json.dumps(_ask("outside", _image(str(outside / "secret.png")))),
        json.dumps(_ask("empty", _image("empty.png"))),
        json.dumps(_ask("bomb", _image("bomb.png"))),
        json.dumps(_ask("wide", _image("wide.png"))),  # the id "wide" again
    ]
    (data / "mixed.jsonl").write_text("".join(line + "\n" for line in lines))
    return data


if __name__ == "__main__":  # pragma: no cover
    print(hostile(Path(sys.argv[1] if len(sys.argv) > 1 else ".")))
