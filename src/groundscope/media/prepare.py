"""One medium made acceptable to the endpoint under the media settings in force (sync).

:func:`prepare_ref` returns the media sent in place of one ``MediaRef``: itself when nothing
changes, a video's frames (JPEG images, in order) with ``video_frames``, a downscaled image
with ``max_image_side`` / ``max_image_bytes``, wav audio with ``audio_transcode``. New media
are inline bytes (nothing is written to disk). It reads and decodes: the client runs it off
the event loop (``client/mediaprep.py``), once per :func:`prepare_key` (the medium's content
identity, ``media/digest.py``, and the settings). Remote media (URLs) pass as they are:
changing them would mean fetching them here.
"""

from __future__ import annotations

import dataclasses

from groundscope.defaults import DEFAULT_MAX_BYTES
from groundscope.errors import MediaError
from groundscope.media.decode import audio_to_wav, sample_frames
from groundscope.media.formats import AUDIO_FORMATS, norm_format, sniff_mime
from groundscope.media.images import max_pixels
from groundscope.media.resize import fit_image
from groundscope.media.settings import MediaSettings, media_settings
from groundscope.media.sources import describe, fingerprint, is_remote, load, read_raw
from groundscope.types import MediaRef, Modality


def needs_preparing(ref: MediaRef, settings: MediaSettings | None = None) -> bool:
    """True when ``ref`` may change before sending (cheap: no I/O)."""
    settings = settings or media_settings()
    return settings.changes(ref.kind) and not is_remote(ref)


def prepare_key(ref: MediaRef) -> str:
    """The identity of what :func:`prepare_ref` makes of ``ref`` under the settings in force.
    The folder the ref is read from is part of it: a medium that needs no conversion is sent
    as the ref itself, and a copy of the same bytes in another dataset's folder (another
    run in the process) must not be read through the first folder's ref."""
    s = media_settings()
    return f"{fingerprint(ref)}|base={ref.base_dir}|{s!r}|px={max_pixels()}"


def prepare_ref(ref: MediaRef) -> tuple[MediaRef, ...]:
    """The media sent in place of ``ref`` under the settings in force (see the module doc)."""
    settings = media_settings()
    if not needs_preparing(ref, settings):
        return (ref,)
    what = describe(ref)
    if ref.kind is Modality.VIDEO:
        data, _ = read_raw(ref, DEFAULT_MAX_BYTES)
        frames = sample_frames(data, what, count=settings.video_frames,
                               fps=ref.fps or settings.video_fps, max_pixels=max_pixels(),
                               side=settings.frame_side)
        if settings.max_image_bytes:  # a frame is an image: the byte budget holds for it too
            frames = [fit_image(f, f"{what} (frame {i + 1})", max_side=None,
                                max_bytes=settings.max_image_bytes) or f
                      for i, f in enumerate(frames)]
        return tuple(MediaRef(Modality.IMAGE, f, format="jpeg", detail=ref.detail)
                     for f in frames)
    if ref.kind is Modality.IMAGE:
        data, mime = load(ref, max_bytes=DEFAULT_MAX_BYTES)
        if not mime.startswith("image/"):
            raise MediaError(f"{what} is not an image (content looks like {mime})")
        fitted = fit_image(data, what, max_side=settings.max_image_side,
                           max_bytes=settings.max_image_bytes)
        if fitted is None:
            return (ref,)
        return (dataclasses.replace(ref, source=fitted, base_dir=None),)
    data, _ = read_raw(ref, DEFAULT_MAX_BYTES)
    fmt = norm_format(sniff_mime(data), Modality.AUDIO) or norm_format(ref.format, Modality.AUDIO)
    if fmt in AUDIO_FORMATS:
        return (ref,)
    wav = audio_to_wav(data, what, max_bytes=DEFAULT_MAX_BYTES)
    return (MediaRef(Modality.AUDIO, wav, format="wav"),)


def prepared_size(refs: tuple[MediaRef, ...]) -> int:
    """Bytes held by prepared media (inline sources only; a path holds nothing)."""
    return sum(len(r.source) for r in refs if isinstance(r.source, bytes))
