"""What media an endpoint accepts: the run's conversion settings, in force per context.

``MediaSettings`` says how media are changed before they are sent (``media/prepare.py``):

- ``video_frames`` N > 0: a video becomes N image parts (JPEG frames sampled evenly, or at
  ``video_fps`` / the record's fps, at most N), in order, where the video stood; 0 sends
  the video itself;
- ``max_image_side`` / ``max_image_bytes``: a larger image is downscaled (format and alpha
  kept; JPEG quality stepped down for bytes); one that cannot fit is a bad sample;
- ``audio_transcode``: flac, ogg and m4a audio is converted to 16 kHz mono wav (the chat
  API takes wav and mp3 only).

The runner puts a run's settings in force (:func:`set_media_settings`, a context variable
as the pixel cap and the media roots are), so the model's requests and every judge's see
the same media. :func:`settings_identity` is what enters the request hash and the judge
cache key: a changed setting never reuses a reply made from other media.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextvars import ContextVar
from dataclasses import dataclass

from groundscope.types import Modality

TRANSCODED_AUDIO = ("flac", "ogg", "m4a")  # converted to wav by audio_transcode
FRAMED_VIDEO = ("mkv", "webm")  # decodable into frames, though no API takes them as video
DEFAULT_FRAME_SIDE = 768  # frames' longest side unless max_image_side is smaller
PYAV_HINT = "pip install -e '.[video]' in the groundscope clone (PyAV)"


@dataclass(frozen=True, slots=True)
class MediaSettings:
    """A run's media conversions (all off by default: media are sent as they are)."""

    video_frames: int = 0
    video_fps: float | None = None
    max_image_side: int | None = None
    max_image_bytes: int | None = None
    audio_transcode: bool = False

    @property
    def active(self) -> bool:
        """True when some medium may be changed before sending."""
        return bool(self.video_frames or self.max_image_side or self.max_image_bytes
                    or self.audio_transcode)

    def changes(self, kind: Modality) -> bool:
        """True when a medium of ``kind`` may be changed before sending."""
        if kind is Modality.VIDEO:
            return self.video_frames > 0
        if kind is Modality.AUDIO:
            return self.audio_transcode
        return bool(self.max_image_side or self.max_image_bytes)

    @property
    def frame_side(self) -> int:
        """The longest side of a video frame sent as an image."""
        return min(DEFAULT_FRAME_SIDE, self.max_image_side or DEFAULT_FRAME_SIDE)


_NONE = MediaSettings()
_SETTINGS: ContextVar[MediaSettings | None] = ContextVar("groundscope_media_settings", default=None)


def media_settings() -> MediaSettings:
    """The media settings in force (none: everything sent as it is)."""
    return _SETTINGS.get() or _NONE


def set_media_settings(settings: MediaSettings) -> None:
    """Put ``settings`` in force for the current context (the runner does, per run)."""
    _SETTINGS.set(settings)


def settings_identity(kinds: Iterable[Modality]) -> dict[str, object]:
    """The settings in force that change media of ``kinds`` (``{}`` when none does: a
    request without such media hashes as it always did).

    >>> set_media_settings(MediaSettings(video_frames=8, max_image_side=512))
    >>> settings_identity([Modality.VIDEO])
    {'video_frames': 8, 'video_fps': None, 'frame_side': 512}
    >>> settings_identity([Modality.AUDIO])
    {}
    >>> set_media_settings(MediaSettings())
    """
    s = media_settings()
    out: dict[str, object] = {}
    present = set(kinds)
    if Modality.VIDEO in present and s.video_frames:
        out.update(video_frames=s.video_frames, video_fps=s.video_fps, frame_side=s.frame_side)
        if s.max_image_bytes:
            out["max_image_bytes"] = s.max_image_bytes
    if Modality.IMAGE in present and (s.max_image_side or s.max_image_bytes):
        out.update(max_image_side=s.max_image_side, max_image_bytes=s.max_image_bytes)
    if Modality.AUDIO in present and s.audio_transcode:
        out["audio_transcode"] = "wav16k"
    return out


def have_pyav() -> bool:
    """True when PyAV can be imported (the ``video`` extra)."""
    try:
        import av  # noqa: F401
    except ImportError:
        return False
    return True
