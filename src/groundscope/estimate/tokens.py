"""Token estimates before any request: rules of thumb, stated, never a tokenizer.

- **Text**: one token per CJK character (Han, kana, hangul, full-width forms), one per
  :data:`CHARS_PER_TOKEN` (4) other characters, rounded up; plus :data:`MESSAGE_TOKENS` (3)
  per message and :data:`REPLY_TOKENS` (3) per request (OpenAI's chat-format overhead).
- **Images**: OpenAI's tile rule (GPT-4o / GPT-4.1 family). ``detail: low`` is a flat
  :data:`IMAGE_BASE` (85); ``high``, and ``auto`` (the default, which the API may serve as
  either: estimated as the larger), fit the image within 2048x2048, scale its shorter side
  down to 768, count 512-pixel tiles: 85 + 170 per tile (1024x1024 -> 765). The size comes
  from the image header (``media.probe``); a remote image (size unknown) counts as
  :data:`UNKNOWN_IMAGE_TOKENS`, a 1024x1024 one.
- **Audio**: :data:`AUDIO_TOKENS_PER_SECOND` (10) per second (OpenAI bills ~600 audio tokens
  a minute); seconds from a WAV header, else the byte size at 128 kbit/s; remote audio
  counts as a minute.
- **Video**: with ``video_frames`` N, N image parts, each at most ``frame_side`` square (an
  upper bound whatever the aspect); else one part of :data:`VIDEO_TOKENS` (8 frames of 765:
  6,120), a rough rule: providers that take video sample frames their own way.
- ``max_image_side``: an image is counted at its downscaled size.
- **Completion**: the cap a request carries (``max_completion_tokens``,
  ``max_output_tokens`` or ``max_tokens`` of its generation config, its ``extra_body``
  too, times ``n``; the Anthropic API's default 4096) is the upper bound; without one there
  is none.

>>> text_tokens("What animal is this?"), text_tokens("这是什么动物？")
(5, 7)
>>> image_tokens(1024, 1024, "high"), image_tokens(2048, 4096, None), image_tokens(4000, 3000, "low")
(765, 1105, 85)
>>> completion_cap({"max_tokens": 64, "n": 2}, "openai_api"), completion_cap({}, "anthropic_api")
(128, 4096)
>>> completion_cap({}, "openai_api") is None
True
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from groundscope import media
from groundscope.client.anthropic import DEFAULT_MAX_TOKENS as ANTHROPIC_MAX_TOKENS
from groundscope.client.openai import effective_config
from groundscope.errors import MediaError
from groundscope.types import MediaPart, MediaRef, Message, Modality

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 3
REPLY_TOKENS = 3
IMAGE_BASE = 85
IMAGE_TILE = 170
UNKNOWN_IMAGE_TOKENS = 765
AUDIO_TOKENS_PER_SECOND = 10
UNKNOWN_AUDIO_SECONDS = 60.0
VIDEO_TOKENS = 8 * 765
_SIZES_MAX = 65_536  # media sizes remembered; the table is dropped when full
_CAP_KEYS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def text_tokens(text: str) -> int:
    """Estimated tokens of a text (see the module docstring)."""
    cjk = len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / CHARS_PER_TOKEN)


def image_tokens(width: int, height: int, detail: str | None) -> int:
    """OpenAI's tile rule for one image of ``width`` x ``height`` at ``detail``."""
    if detail == "low":
        return IMAGE_BASE
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return IMAGE_BASE + IMAGE_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def completion_cap(generation_config: Mapping[str, Any], api: str) -> int | None:
    """The most completion tokens one request may produce (None: no cap is sent)."""
    config = effective_config(generation_config)
    extra = config.get("extra_body")
    if isinstance(extra, Mapping):
        config.update(extra)
    caps = [v for k in _CAP_KEYS if isinstance(v := config.get(k), int) and not isinstance(v, bool)
            and v > 0]
    cap = min(caps) if caps else (ANTHROPIC_MAX_TOKENS if api == "anthropic_api" else None)
    n = config.get("n")
    if cap is not None and isinstance(n, int) and not isinstance(n, bool) and n > 1:
        cap *= n
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
                tokens = UNKNOWN_IMAGE_TOKENS
            else:
                tokens = image_tokens(*self._fitted(size.width, size.height), ref.detail)
            t.image_tokens += tokens
            return tokens
        if ref.kind is Modality.AUDIO:
            seconds = size.seconds if size is not None and size.seconds is not None \
                else UNKNOWN_AUDIO_SECONDS
            tokens = math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)
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
