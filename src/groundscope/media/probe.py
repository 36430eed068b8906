"""What a medium weighs, read from its header, never its pixels or samples: an image's width
and height (Pillow's header parse, ``images.image_size``), an audio file's length (a WAV
header's data size over its byte rate; other audio: its byte size at 128 kbit/s), and every
local or inline medium's byte size. Used by the dry-run estimate (``estimate/``). A remote
medium is never fetched here: its size is unknown (``MediaSize()``).

>>> riff = (b"RIFF" + (36 + 16000).to_bytes(4, "little") + b"WAVEfmt " + (16).to_bytes(4, "little")
...         + (1).to_bytes(2, "little") + (1).to_bytes(2, "little") + (8000).to_bytes(4, "little")
...         + (16000).to_bytes(4, "little") + (2).to_bytes(2, "little") + (16).to_bytes(2, "little")
...         + b"data" + (16000).to_bytes(4, "little"))
>>> wav_seconds(riff)
1.0
>>> wav_seconds(b"ID3....") is None
True
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from groundscope.defaults import DEFAULT_MAX_BYTES
from groundscope.media.images import image_size
from groundscope.media.sources import classify, is_remote, read_raw, resolve_path
from groundscope.types import MediaRef, Modality

COMPRESSED_AUDIO_BYTES_PER_SECOND = 16_000  # 128 kbit/s: a typical mp3 bit rate
WAV_HEAD = 4096  # the RIFF chunks before "data" (fmt, LIST, fact ...) fit in this


@dataclass(frozen=True, slots=True)
class MediaSize:
    """A medium's byte size, an image's pixel size, an audio's seconds (None: unknown)."""

    nbytes: int | None = None
    width: int | None = None
    height: int | None = None
    seconds: float | None = None


def wav_seconds(head: bytes, total: int | None = None) -> float | None:
    """A WAV file's length from its header (the data chunk's size, at most what the file's
    ``total`` bytes hold, over the byte rate), or None when ``head`` is no RIFF/WAVE header
    holding both."""
    if len(head) < 12 or head[:4] != b"RIFF" or head[8:12] != b"WAVE":
        return None
    pos, byte_rate = 12, 0
    while pos + 8 <= len(head):
        chunk, size = head[pos:pos + 4], int.from_bytes(head[pos + 4:pos + 8], "little")
        if chunk == b"fmt " and pos + 20 <= len(head):
            byte_rate = int.from_bytes(head[pos + 16:pos + 20], "little")
        elif chunk == b"data":
            if total is not None:  # a streamed WAV declares 0xFFFFFFFF
                size = min(size, max(total - pos - 8, 0))
            return size / byte_rate if byte_rate > 0 else None
        pos += 8 + size + (size & 1)  # chunks are word-aligned
    return None


def audio_seconds(head: bytes, nbytes: int) -> float:
    """An audio file's seconds: its WAV header's, else ``nbytes`` at 128 kbit/s."""
    seconds = wav_seconds(head, nbytes)
    return nbytes / COMPRESSED_AUDIO_BYTES_PER_SECOND if seconds is None else seconds


def _byte_size(ref: MediaRef, max_bytes: int) -> int:
    if classify(ref.source) == "path":
        return os.path.getsize(resolve_path(ref))
    return len(read_raw(ref, max_bytes)[0])


def probe(ref: MediaRef, *, max_bytes: int = DEFAULT_MAX_BYTES) -> MediaSize:
    """The sizes of a local or inline medium from its header (see the module docstring);
    ``MediaSize()`` for a remote one. A MediaError when it cannot be read."""
    if is_remote(ref):
        return MediaSize()
    nbytes = _byte_size(ref, max_bytes)
    if ref.kind is Modality.IMAGE:
        width, height = image_size(ref, max_bytes=max_bytes)
        return MediaSize(nbytes, width, height)
    if ref.kind is Modality.AUDIO:
        head = read_raw(ref, max_bytes, head=WAV_HEAD)[0]
        return MediaSize(nbytes, seconds=audio_seconds(head, nbytes))
    return MediaSize(nbytes)
