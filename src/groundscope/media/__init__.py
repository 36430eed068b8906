"""Media: a ``MediaRef`` -> bytes + mime, validation, and the wire encoding of one medium.

The only package that reads media bytes or produces base64. Everything else handles
``MediaRef`` values, which name a medium without holding its decoded payload.

- ``sources``: classify a source (path, URL, data URI, base64, bytes), read and decode it,
  resolve local paths, and describe / fingerprint it without its payload;
- ``formats``: mime types from magic bytes first (a ``.jpg`` that holds a PNG is sent as
  PNG), then the format hint, the data-URI mime and the file extension; the audio/video
  *format* on the wire follows the hint first, then magic bytes, data-URI mime, extension;
- ``roots``: the allowed media roots, the confinement check and the confined open;
- ``images``: Pillow validation, the pixel cap and an image's size from its header;
- ``budget``: the process-wide budget of decoded pixel bytes; ``reduced``: an image
  decoded no larger than needed under it (``small_image``: a preview);
- ``probe``: what a medium weighs (bytes, pixel size, audio seconds) from its header;
- ``values``: dataset column values -> ``MediaRef``;
- ``settings``: what the endpoint accepts (video as frames, image side / bytes, audio as
  wav), in force per context; ``prepare``: one medium converted so (``decode``: PyAV,
  ``resize``: Pillow);
- ``wire``: the OpenAI content part of a medium, with a bounded cache of encoded payloads
  (remote audio: from the bytes the client fetched at send time).

The submodules share a few public helpers among themselves (``sources.classify``,
``sources.read_raw``, ``sources.supported_format``, ``images.open_image``, ``formats.FORMAT_MIME``,
``formats.norm_format`` ...); outside ``media`` use the names re-exported here. A ``MediaRef``
is shown in outputs as ``describe(ref)``.
"""

from groundscope.defaults import DEFAULT_MAX_BYTES, DEFAULT_MAX_PIXELS
from groundscope.media.digest import earlier_content_ids
from groundscope.media.formats import AUDIO_FORMATS, VIDEO_FORMATS, check_format, sniff_mime
from groundscope.media.images import (
    check,
    image_size,
    max_pixels,
    set_max_pixels,
)
from groundscope.media.prepare import needs_preparing, prepare_key, prepare_ref, prepared_size
from groundscope.media.probe import MediaSize, probe
from groundscope.media.reduced import small_image
from groundscope.media.roots import (
    chosen_media_roots,
    media_roots,
    media_roots_in_force,
    set_media_roots,
)
from groundscope.media.settings import (
    PYAV_HINT,
    MediaSettings,
    have_pyav,
    media_settings,
    set_media_settings,
    settings_identity,
)
from groundscope.media.sources import (
    describe,
    exists,
    fetched_audio_format,
    fingerprint,
    is_remote,
    load,
    resolve_path,
    set_sending,
)
from groundscope.media.values import check_fps, media_from_value
from groundscope.media.wire import wire_part

__all__ = [
    "AUDIO_FORMATS",
    "DEFAULT_MAX_BYTES",
    "DEFAULT_MAX_PIXELS",
    "PYAV_HINT",
    "VIDEO_FORMATS",
    "MediaSettings",
    "MediaSize",
    "check",
    "check_format",
    "check_fps",
    "chosen_media_roots",
    "describe",
    "earlier_content_ids",
    "exists",
    "fetched_audio_format",
    "fingerprint",
    "have_pyav",
    "image_size",
    "is_remote",
    "load",
    "max_pixels",
    "media_from_value",
    "media_roots",
    "media_roots_in_force",
    "media_settings",
    "needs_preparing",
    "prepare_key",
    "prepare_ref",
    "prepared_size",
    "probe",
    "resolve_path",
    "set_max_pixels",
    "set_media_roots",
    "set_media_settings",
    "set_sending",
    "settings_identity",
    "small_image",
    "sniff_mime",
    "wire_part",
]  # fmt: skip
