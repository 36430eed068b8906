"""Real media bytes and dataset files for the media / dataset tests (plain helpers, no conftest).

Images come from Pillow, WAV from the stdlib ``wave`` module; MP3 and MP4 are the committed
example files (made by ``examples/make_media.py``). Container headers that no local tool
writes (FLAC, Ogg, MOV, AVI, MPEG-PS, WebM) are given as their documented magic bytes.
"""

from __future__ import annotations

import base64
import io
import json
import math
import struct
import wave
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
EXAMPLE_MEDIA = EXAMPLES / "media"

# magic-byte headers, padded so a sniffer sees a realistic first 16 bytes
FLAC_HEAD = b"fLaC\x00\x00\x00\x22" + b"\x00" * 8
OGG_HEAD = b"OggS\x00\x02" + b"\x00" * 10
MOV_HEAD = b"\x00\x00\x00\x14ftypqt  \x00\x00\x00\x00"
AVI_HEAD = b"RIFF\x00\x10\x00\x00AVI LIST"
MPEG_HEAD = b"\x00\x00\x01\xba\x44\x00\x04\x00\x04\x01\x01\x89\xc3\xf8\x00\x00"
WEBM_HEAD = b"\x1a\x45\xdf\xa3\x9f\x42\x86\x81\x01\x42\xf7\x81\x01\x42\xf2\x81"
MP3_FRAME_HEAD = b"\xff\xfb\x90\x64" + b"\x00" * 12
ID3_HEAD = b"ID3\x04\x00\x00\x00\x00\x00\x00" + b"\x00" * 6


def image_bytes(fmt: str = "JPEG", size: tuple[int, int] = (16, 12), color: str = "red") -> bytes:
    """A small real image (a coloured disc on white) in the given Pillow format."""
    image = Image.new("RGB", size, "white")
    ImageDraw.Draw(image).ellipse((1, 1, size[0] - 2, size[1] - 2), fill=color)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt)
    return buffer.getvalue()


def wav_bytes(seconds: float = 0.05, rate: int = 8000, freq: float = 440.0) -> bytes:
    frames = int(seconds * rate)
    samples = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * freq * n / rate))) for n in range(frames)
    )
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(samples)
    return buffer.getvalue()


def mp3_bytes() -> bytes:
    return (EXAMPLE_MEDIA / "sample.mp3").read_bytes()


def mp4_bytes() -> bytes:
    return (EXAMPLE_MEDIA / "sample.mp4").read_bytes()


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def data_uri(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{b64(data)}"


def write(directory: Path, name: str, data: bytes) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_media_dir(root: Path) -> Path:
    """``root/media`` with dog.jpg, cat.png, tone.wav, beep.mp3, clip.mp4."""
    media = root / "media"
    write(media, "dog.jpg", image_bytes("JPEG", color="brown"))
    write(media, "cat.png", image_bytes("PNG", color="gray"))
    write(media, "tone.wav", wav_bytes())
    write(media, "beep.mp3", mp3_bytes())
    write(media, "clip.mp4", mp4_bytes())
    return media


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any] | str]) -> Path:
    """One line per item: a mapping is dumped as JSON, a string is written verbatim."""
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def write_delimited(
    path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]], delimiter: str = "\t"
) -> Path:
    """A TSV/CSV file; list/dict cells are JSON-encoded, as a user would write them."""
    import csv

    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter, lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            writer.writerow([json.dumps(c) if isinstance(c, list | dict) else c for c in row])
    return path


def write_parquet(path: Path, rows: Sequence[Mapping[str, Any]], schema: Any = None) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pylist(list(rows), schema=schema)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def user(content: Any) -> dict[str, Any]:
    return {"role": "user", "content": content}
