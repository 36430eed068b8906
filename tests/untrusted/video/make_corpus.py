"""Hostile videos for ``tests/test_untrusted_video.py``, written into a directory on demand
(PyAV makes the real ones; nothing large is committed).

    python tests/untrusted/video/make_corpus.py OUT_DIR

Each file, and what sending it with ``--video-frames`` must give (a bad record found at load, one line):

    good.mp4          8 colour frames: the control, sent as 8 images
    corrupt.mp4       an mp4 ``ftyp`` head, then junk                  not a readable media file
    truncated.mp4     the first half of a good mp4 (no ``moov``)       no video stream
    no_frames.avi     an AVI with a video stream and no frame          no duration (no frames)
    png_named.mp4     PNG bytes named .mp4                             refused as a record
    long_gop.mp4      700 frames, one keyframe: sampled by seeking     8 frames (the per-seek
                      to each target, decoding on from the keyframe    bound, if lowered)
"""

from __future__ import annotations

import io
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: video_fixtures

from video_fixtures import COLOURS, clip_bytes

LONG_GOP = [COLOURS[i * 8 // 700] for i in range(700)]  # 8 colours, 87.5 frames each


def _no_frames() -> bytes:
    import av

    out = io.BytesIO()
    with av.open(out, "w", format="avi") as container:
        stream = container.add_stream("mpeg4", rate=8)
        stream.width, stream.height = 64, 48
        container.start_encoding()  # the header, and not one frame
    return out.getvalue()


def _png() -> bytes:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (32, 32), "red").save(out, "PNG")
    return out.getvalue()


def make(root: Path) -> dict[str, Path]:
    """Write the corpus into ``root``; name -> path."""
    root.mkdir(parents=True, exist_ok=True)
    good = clip_bytes(COLOURS)
    files = {
        "good.mp4": good,
        "corrupt.mp4": good[:32] + bytes(range(256)) * 8,
        "truncated.mp4": good[: len(good) // 2],
        "no_frames.avi": _no_frames(),
        "png_named.mp4": _png(),
        "long_gop.mp4": clip_bytes(LONG_GOP, fps=25, size=(16, 16), gop=1000),
    }
    out = {}
    for name, data in files.items():
        out[name] = root / name
        out[name].write_bytes(data)
    return out


if __name__ == "__main__":
    for name, path in make(Path(sys.argv[1])).items():
        print(f"{name}: {path.stat().st_size} bytes")
