"""The dry-run's token counts: the rules of ``groundscope/tokens.py`` applied to a sample's
messages, each medium's size probed once from its header (``media.probe``), and the
completion cap a request of a generation config carries.

- ``max_image_side``: an image is counted at its downscaled size; a remote image (size
  unknown) counts as 1024x1024.
- **Video**: with ``video_frames`` N, N image parts, each at most ``frame_side`` square (an
  upper bound whatever the aspect); else one part of ``VIDEO_TOKENS``.
- **Completion**: the cap of the generation config (its ``extra_body`` too; the Anthropic
  API's default 4096 when it has none), times ``n``.

>>> completion_cap({"max_tokens": 64, "n": 2}, "openai_api"), completion_cap({}, "anthropic_api")
(128, 4096)
>>> completion_cap({}, "openai_api") is None
True
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from groundscope import media
from groundscope.client.anthropic import DEFAULT_MAX_TOKENS as ANTHROPIC_MAX_TOKENS
from groundscope.client.openai import effective_config
from groundscope.errors import MediaError
from groundscope.tokens import (
    MESSAGE_TOKENS,
    REPLY_TOKENS,
    UNKNOWN_AUDIO_SECONDS,
    VIDEO_TOKENS,
    audio_tokens,
    image_tokens,
    output_cap,
    text_tokens,
)
from groundscope.types import MediaPart, MediaRef, Message, Modality

_SIZES_MAX = 65_536  # media sizes remembered; the table is dropped when full


def completion_cap(generation_config: Mapping[str, Any], api: str) -> int | None:
    """The most completion tokens one request may produce (None: no cap is sent)."""
    config = effective_config(generation_config)
    extra = config.get("extra_body")
    if isinstance(extra, Mapping):
        config.update(extra)
    cap = output_cap(config)
    if cap is None and api == "anthropic_api":
        cap = output_cap({**config, "max_tokens": ANTHROPIC_MAX_TOKENS})
    return cap


@dataclass
class MediaTally:
    """The media an estimate saw: counts and the tokens they were estimated at."""

    images: int = 0
    image_tokens: int = 0
    unknown_images: int = 0
    audio: int = 0
    audio_seconds: float = 0.0
    audio_tokens: int = 0
    videos: int = 0
    video_tokens: int = 0
    unreadable: int = 0

    def to_json(self) -> dict[str, Any]:
        return {k: round(v, 1) if isinstance(v, float) else v for k, v in vars(self).items()}


class TokenCounter:
    """Estimated prompt tokens of requests, media sizes probed once per medium."""

    def __init__(self, probe: Callable[[MediaRef], media.MediaSize] = media.probe,
                 settings: media.MediaSettings | None = None) -> None:
        self._probe = probe
        self.settings = settings or media.MediaSettings()
        self._sizes: dict[tuple[str, str, str | None], media.MediaSize | None] = {}
        self.tally = MediaTally()  # the evaluated model's requests' media

    def prompt(self, messages: Sequence[Message], *, tally: bool = False) -> int:
        """Estimated prompt tokens of one request of ``messages``."""
        total = REPLY_TOKENS
        for msg in messages:
            total += MESSAGE_TOKENS + text_tokens(msg.text())
            if msg.tool_calls:
                total += text_tokens(orjson.dumps([dict(c) for c in msg.tool_calls]).decode())
            if not isinstance(msg.content, str):
                total += sum(self.medium(p.media, tally) for p in msg.content
                             if isinstance(p, MediaPart))
        return total

    def medium(self, ref: MediaRef, tally: bool = False) -> int:
        """Estimated tokens of one medium (see the module docstring)."""
        size = self._size(ref)
        t = self.tally if tally else MediaTally()
        if ref.kind is Modality.IMAGE:
            t.images += 1
            if size is None or size.width is None or size.height is None:
                t.unknown_images += 1
                tokens = image_tokens(None, None, ref.detail)
            else:
                tokens = image_tokens(*self._fitted(size.width, size.height), ref.detail)
            t.image_tokens += tokens
            return tokens
        if ref.kind is Modality.AUDIO:
            seconds = size.seconds if size is not None and size.seconds is not None \
                else UNKNOWN_AUDIO_SECONDS
            tokens = audio_tokens(seconds)
            t.audio += 1
            t.audio_seconds += seconds
            t.audio_tokens += tokens
            return tokens
        t.videos += 1
        frames = self.settings.video_frames
        side = self.settings.frame_side
        tokens = frames * image_tokens(side, side, ref.detail) if frames else VIDEO_TOKENS
        t.video_tokens += tokens
        return tokens

    def _fitted(self, width: int, height: int) -> tuple[int, int]:
        """An image's size once ``max_image_side`` has downscaled it."""
        side = self.settings.max_image_side
        if side is None or max(width, height) <= side:
            return width, height
        scale = side / max(width, height)
        return max(1, round(width * scale)), max(1, round(height * scale))

    def _size(self, ref: MediaRef) -> media.MediaSize | None:
        key = (str(ref.kind), media.describe(ref), str(ref.base_dir) if ref.base_dir else None)
        if key not in self._sizes:
            if len(self._sizes) >= _SIZES_MAX:  # memory stays bounded on a huge dataset
                self._sizes.clear()
            try:
                self._sizes[key] = self._probe(ref)
            except (MediaError, OSError):  # checked when loaded; gone since: size unknown
                self._sizes[key] = None
                self.tally.unreadable += 1
        return self._sizes[key]
