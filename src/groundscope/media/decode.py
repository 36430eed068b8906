"""PyAV decoding, bounded: a video's sampled frames as JPEG, audio converted to wav.

PyAV (``av>=18.1,<19``, the ``video`` extra) is imported lazily; without it the functions
raise a ``MediaError`` saying how to install it. Untrusted bytes are held to bounds at every
step, and anything FFmpeg refuses is a ``MediaError`` naming the medium, never a crash:

- the container must be a real video (bytes that open as an image pipe, such as a PNG named
  ``.mp4``, are refused), with a video stream that has a codec and a positive duration;
- frames over the pixel cap (``max_image_pixels``) are refused before decoding, and every
  decoded frame is checked again (a stream may change size midway);
- at most :data:`MAX_DECODED_FRAMES` frames are decoded for one video (a short video is
  decoded in one pass keeping the chosen frames; a long one seeks to each target);
- converted audio is cut off at ``max_bytes`` of wav (an error, not a silent cut).

Frames are sampled at ``start + (i + 0.5) * duration / n`` (the middle of n equal spans):
for each target the frame on screen then (the last one starting at or before it), encoded
at once (no more than two decoded frames are held). MKV / WebM report no frame count and no
stream duration: the container's duration is used. A video whose frames run out before
the last target repeats its last frame, so a sample always gets n images.
"""

from __future__ import annotations

import io
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from groundscope.errors import MediaError
from groundscope.media.settings import PYAV_HINT

MAX_DECODED_FRAMES = 20_000  # frames decoded for one video, whatever it claims
LINEAR_MAX_FRAMES = 600  # up to this many frames (estimated): one pass, else seek per target
SEEK_MAX_FRAMES = 2_000  # frames decoded after one seek (a keyframe that far back: refused)
JPEG_QUALITY = 85
WAV_RATE = 16_000


def _av() -> Any:
    try:
        import av
    except ImportError:
        raise MediaError(f"decoding video or audio needs PyAV: {PYAV_HINT}") from None
    return av


def _open(data: bytes, what: str) -> Any:
    av = _av()
    try:
        return av.open(io.BytesIO(data), mode="r", timeout=30.0)
    except Exception as exc:  # FFmpeg's many error types
        raise MediaError(f"{what}: not a readable media file ({_why(exc)})") from None


@contextmanager
def _opened(data: bytes, what: str, failing: str) -> Iterator[Any]:
    """The container of ``data``, closed after use; an error of FFmpeg's or PyAV's inside
    (odd streams fail in many ways) becomes one ``MediaError``: "``what``: ``failing``
    (FFmpeg's words)". A MediaError raised inside passes as it is."""
    container = _open(data, what)
    try:
        yield container
    except MediaError:
        raise
    except Exception as exc:
        raise MediaError(f"{what}: {failing} ({_why(exc)})") from None
    finally:
        container.close()


def _why(exc: BaseException) -> str:
    """FFmpeg's own words (``Invalid data found when processing input``), one line."""
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return str(text).splitlines()[0][:200]


def sample_frames(data: bytes, what: str, *, count: int, fps: float | None,
                  max_pixels: int, side: int) -> list[bytes]:
    """``count`` frames of a video (fewer at ``fps``: one per 1/fps seconds, at most
    ``count``), in order, as JPEG bytes whose longest side is at most ``side``."""
    with _opened(data, what, "video cannot be decoded") as container:
        stream = _video_stream(container, what, max_pixels)
        start, duration = _span(container, stream, what)
        n = count if not fps else max(1, min(count, math.floor(duration * fps)))
        targets = [start + (i + 0.5) * duration / n for i in range(n)]
        rate = float(stream.average_rate or 30)
        if duration * rate <= LINEAR_MAX_FRAMES:
            return _linear(container, stream, targets, what, max_pixels, _Encoder(side))
        # a long video: frame threading (set before the first decode) pays for its threads;
        # measured on a 3 s clip it costs ~1 ms more than it saves
        stream.thread_type = "AUTO"
        return _seeking(container, stream, targets, what, max_pixels, _Encoder(side))


def first_frame(data: bytes, what: str, *, max_pixels: int, side: int) -> bytes:
    """A video's first frame as JPEG, its longest side at most ``side`` (the HTML report's
    thumbnail): one frame decoded, after at most :data:`SEEK_MAX_FRAMES` packets."""
    with _opened(data, what, "video cannot be decoded") as container:
        stream = _video_stream(container, what, max_pixels)
        for packets, packet in enumerate(container.demux(stream)):
            if packets >= SEEK_MAX_FRAMES:
                break
            for frame in packet.decode():
                _check_pixels(frame.width, frame.height, what, max_pixels)
                return _Encoder(side)(frame)
    raise MediaError(f"{what}: no video frame could be decoded")


def _video_stream(container: Any, what: str, max_pixels: int) -> Any:
    name = str(container.format.name or "")
    if name.endswith("_pipe") or name == "image2":
        raise MediaError(f"{what}: not a video (its bytes are a single image: {name})")
    if not container.streams.video:
        raise MediaError(f"{what}: no video stream")
    stream = container.streams.video[0]
    ctx = stream.codec_context
    if ctx is None:
        raise MediaError(f"{what}: video stream has no decoder (truncated or unknown codec)")
    _check_pixels(ctx.width, ctx.height, what, max_pixels)
    return stream


def _check_pixels(width: int, height: int, what: str, max_pixels: int) -> None:
    if width * height > max_pixels:
        raise MediaError(f"{what}: video frames of {width}x{height} = {width * height} pixels "
                         f"are over the limit of {max_pixels} (max_image_pixels)")


def _span(container: Any, stream: Any, what: str) -> tuple[float, float]:
    """(start, duration) in seconds: the stream's, else the container's (MKV / WebM)."""
    base = float(stream.time_base) if stream.time_base else 0.0
    start = float(stream.start_time or 0) * base
    if stream.duration and base:
        duration = float(stream.duration) * base
    elif container.duration:
        duration = float(container.duration) / 1_000_000
    else:
        duration = 0.0
    if not duration > 0 or not math.isfinite(duration):
        raise MediaError(f"{what}: video has no duration (no frames?)")
    return start, duration


def _time(frame: Any, index: int, rate: float) -> float:
    return float(frame.time) if frame.time is not None else index / rate


class _Encoder:
    """A chosen frame as JPEG, encoded once however many targets it stands for; no other
    decoded frame is kept (at most one beside the one being decoded)."""

    def __init__(self, side: int) -> None:
        from av.video.reformatter import VideoReformatter

        self.side = side
        self._frame: Any = None
        self._jpeg = b""
        self._scaler = VideoReformatter()  # one scaler context for the video's frames

    def __call__(self, frame: Any) -> bytes:
        if frame is not self._frame:
            self._frame, self._jpeg = frame, self._encode(frame)
        return self._jpeg

    def _encode(self, frame: Any) -> bytes:
        from PIL import Image

        width, height = frame.width, frame.height
        scale = min(1.0, self.side / max(width, height, 1))
        rgb = self._scaler.reformat(frame, width=max(1, round(width * scale)),
                                    height=max(1, round(height * scale)), format="rgb24")
        plane = rgb.planes[0]
        image = Image.frombuffer("RGB", (rgb.width, rgb.height), bytes(plane), "raw", "RGB",
                                 plane.line_size, 1)
        out = io.BytesIO()
        image.save(out, format="JPEG", quality=JPEG_QUALITY)
        return out.getvalue()


def _linear(container: Any, stream: Any, targets: list[float], what: str,
            max_pixels: int, encode: _Encoder) -> list[bytes]:
    """One pass: for each target the frame on screen then (the last one at or before it)."""
    rate = float(stream.average_rate or 30)
    got: list[bytes] = []
    shown = None
    for index, frame in enumerate(container.decode(stream)):
        if index >= MAX_DECODED_FRAMES:
            raise MediaError(f"{what}: more than {MAX_DECODED_FRAMES} frames to decode")
        _check_pixels(frame.width, frame.height, what, max_pixels)
        t = _time(frame, index, rate)
        while len(got) < len(targets) and t > targets[len(got)] + 1e-6:
            got.append(encode(shown if shown is not None else frame))
        if len(got) == len(targets):
            break
        shown = frame
    return _filled(got, None if shown is None else encode(shown), targets, what)


def _seeking(container: Any, stream: Any, targets: list[float], what: str,
             max_pixels: int, encode: _Encoder) -> list[bytes]:
    """Seek to the keyframe before each target, decode on to the frame on screen then."""
    rate = float(stream.average_rate or 30)
    base = float(stream.time_base)
    got: list[bytes] = []
    shown = None
    for target in targets:
        container.seek(int(target / base), stream=stream, backward=True, any_frame=False)
        shown = None
        for index, frame in enumerate(container.decode(stream)):
            if index >= SEEK_MAX_FRAMES:
                raise MediaError(f"{what}: more than {SEEK_MAX_FRAMES} frames between keyframes")
            _check_pixels(frame.width, frame.height, what, max_pixels)
            if _time(frame, index, rate) > target + 1e-6:
                shown = shown if shown is not None else frame
                break
            shown = frame
        if shown is None:
            break  # nothing decodes after this seek: the stream ends here
        got.append(encode(shown))
    return _filled(got, got[-1] if got else None, targets, what)


def _filled(got: list[bytes], last: bytes | None, targets: list[float],
            what: str) -> list[bytes]:
    """The frames found, the last one repeated for targets past the end of the stream."""
    if last is None:
        raise MediaError(f"{what}: video has no decodable frame")
    return got + [last] * (len(targets) - len(got))


def audio_to_wav(data: bytes, what: str, *, max_bytes: int) -> bytes:
    """The first audio stream of ``data`` as 16 kHz mono 16-bit wav (at most ``max_bytes``)."""
    av = _av()
    with _opened(data, what, "audio cannot be converted to wav") as container:
        if not container.streams.audio:
            raise MediaError(f"{what}: no audio stream")
        out = io.BytesIO()
        with av.open(out, "w", format="wav") as sink:
            stream = sink.add_stream("pcm_s16le", rate=WAV_RATE)
            stream.layout = "mono"
            resampler = av.AudioResampler(format="s16", layout="mono", rate=WAV_RATE)
            for frame in container.decode(container.streams.audio[0]):
                for packet in _encode(stream, resampler.resample(frame)):
                    sink.mux(packet)
                if out.tell() > max_bytes:
                    raise MediaError(f"{what}: audio is over {max_bytes} bytes as wav")
            for packet in _encode(stream, resampler.resample(None)):
                sink.mux(packet)
            sink.mux(stream.encode(None))
        wav = out.getvalue()
    if len(wav) <= 44:
        raise MediaError(f"{what}: audio has no decodable samples")
    return wav


def probe_audio(data: bytes, what: str, *, max_bytes: int | None = None) -> None:
    """Check that ``data`` holds a decodable audio stream (its first frame decodes) whose
    length, as its header states it, fits in ``max_bytes`` of wav: what a record's audio to
    be converted to wav is checked for, before any request."""
    with _opened(data, what, "audio cannot be decoded") as container:
        streams = container.streams.audio
        if not streams or streams[0].codec_context is None:
            raise MediaError(f"{what}: no audio stream")
        seconds = (container.duration or 0) / 1_000_000
        if max_bytes is not None and seconds * WAV_RATE * 2 > max_bytes:
            raise MediaError(f"{what}: audio of {seconds:.0f} s is over {max_bytes} bytes as "
                             f"wav ({WAV_RATE} Hz mono 16-bit)")
        for _ in container.decode(streams[0]):
            return
        raise MediaError(f"{what}: audio has no decodable samples")


def probe_video(data: bytes, what: str, *, max_pixels: int) -> None:
    """Check that ``data`` is a video frames can be sampled from (a video stream with a
    decoder, frames within the pixel cap, a positive duration), from its header: what a
    record's video is checked for under ``video_frames``, before any request."""
    with _opened(data, what, "video cannot be read") as container:
        _span(container, _video_stream(container, what, max_pixels), what)


def _encode(stream: Any, frames: list[Any]) -> list[Any]:
    return [packet for frame in frames for packet in stream.encode(frame)]
