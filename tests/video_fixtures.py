"""Small real videos and audio made with PyAV, for the media-conversion tests and benchmark.

``clip_bytes(colours)`` encodes one frame per colour, so a test can tell which frames were
sent by their colour; sampled evenly into ``len(colours)`` frames, frame i is colour i.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (255, 0, 255), (0, 255, 255),
           (255, 255, 255), (0, 0, 0)]


def clip_bytes(colours: Sequence[tuple[int, int, int]] = COLOURS, *, fps: int = 8,
               size: tuple[int, int] = (64, 48), fmt: str = "mp4", codec: str = "mpeg4",
               repeat: int = 1, gop: int = 1) -> bytes:
    """A video showing each colour for ``repeat`` frames at ``fps`` (a keyframe every ``gop``
    frames: by default every frame is one)."""
    import av
    import numpy as np

    out = io.BytesIO()
    with av.open(out, "w", format=fmt) as container:
        # no keyframe on a scene change: keyframes only every ``gop`` frames
        stream = container.add_stream(codec, rate=fps, options={"sc_threshold": "1000000000"})
        stream.width, stream.height = size
        stream.pix_fmt = "yuv420p"
        stream.gop_size = gop
        for colour in colours:
            for _ in range(repeat):
                rgb = np.empty((size[1], size[0], 3), dtype=np.uint8)
                rgb[:, :] = colour
                frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
                for packet in stream.encode(frame):
                    container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def audio_bytes(fmt: str = "flac", codec: str = "flac", seconds: float = 0.5,
                rate: int = 22_050) -> bytes:
    """A sine tone encoded as ``fmt`` (flac, ogg/libvorbis|opus, ipod(m4a)/aac)."""
    import av
    import numpy as np

    out = io.BytesIO()
    with av.open(out, "w", format=fmt) as container:
        stream = container.add_stream(codec, rate=rate)
        stream.layout = "mono"
        n = int(seconds * rate)
        samples = (np.sin(2 * math.pi * 440 * np.arange(n) / rate) * 8000).astype(np.int16)
        frame = av.AudioFrame.from_ndarray(samples.reshape(1, -1), format="s16", layout="mono")
        frame.rate = rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()
