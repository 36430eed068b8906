"""The one token estimate before any request: rules of thumb, stated, never a tokenizer.

Two readers apply these rules, each to what it holds: the dry-run to a sample's messages,
media sizes probed from their headers (``estimate/tokens.py``: ``TokenCounter``), and the
client to a request body, just before the rate-limit gate charges it (``client/charge.py``).

- **Text**: one token per CJK character (Han, kana, hangul, full-width forms), one per
  :data:`CHARS_PER_TOKEN` (4) other characters, rounded up; plus :data:`MESSAGE_TOKENS` (3)
  per message and :data:`REPLY_TOKENS` (3) per request (OpenAI's chat-format overhead).
- **Images**: OpenAI's tile rule (GPT-4o / GPT-4.1 family). ``detail: low`` is a flat
  :data:`IMAGE_BASE` (85); ``high``, and ``auto`` (the default, which the API may serve as
  either: estimated as the larger), fit the image within 2048x2048, scale its shorter side
  down to 768, count 512-pixel tiles: 85 + 170 per tile (1024x1024 -> 765). An image of
  unknown size (remote, or inside a request body) counts as 1024x1024:
  :data:`UNKNOWN_IMAGE_TOKENS` (765), 85 at ``detail: low``.
- **Audio**: :data:`AUDIO_TOKENS_PER_SECOND` (10) per second (OpenAI bills ~600 audio tokens
  a minute); seconds from a WAV header, else the byte size at 128 kbit/s
  (``media/probe.py``); remote audio counts as :data:`UNKNOWN_AUDIO_SECONDS` (a minute).
- **Video**: with ``video_frames`` N, N image parts; else one part of :data:`VIDEO_TOKENS`
  (8 frames of 765: 6,120), a rough rule: providers that take video sample frames their
  own way.
- **Completion**: the smallest cap a request carries (``max_completion_tokens``,
  ``max_output_tokens``, ``max_tokens``), times ``n``, is the upper bound; without one
  there is none. The prompt is counted once whatever ``n``.

>>> text_tokens("What animal is this?"), text_tokens("这是什么动物？")
(5, 7)
>>> image_tokens(1024, 1024, "high"), image_tokens(2048, 4096, None), image_tokens(4000, 3000, "low")
(765, 1105, 85)
>>> image_tokens(None, None, "auto"), image_tokens(None, None, "low")
(765, 85)
>>> output_cap({"max_tokens": 64, "max_completion_tokens": 32, "n": 2}), output_cap({})
(64, None)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

CHARS_PER_TOKEN = 4
MESSAGE_TOKENS = 3
REPLY_TOKENS = 3
IMAGE_BASE = 85
IMAGE_TILE = 170
UNKNOWN_IMAGE_TOKENS = 765
AUDIO_TOKENS_PER_SECOND = 10
UNKNOWN_AUDIO_SECONDS = 60.0
VIDEO_TOKENS = 8 * 765
MAX_TOKENS = 10**12  # no estimate is larger (a hostile count stays a number)
CAP_KEYS = ("max_completion_tokens", "max_output_tokens", "max_tokens")
_CJK = re.compile("[\u1100-\u11ff\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")


def text_tokens(text: str) -> int:
    """Estimated tokens of a text (see the module docstring)."""
    cjk = 0 if text.isascii() else len(_CJK.findall(text))
    return cjk + math.ceil((len(text) - cjk) / CHARS_PER_TOKEN)


def image_tokens(width: int | None, height: int | None, detail: str | None) -> int:
    """OpenAI's tile rule for one image of ``width`` x ``height`` (None: unknown, counted as
    1024x1024) at ``detail``."""
    if detail == "low":
        return IMAGE_BASE
    if width is None or height is None:
        return UNKNOWN_IMAGE_TOKENS
    w, h = float(width), float(height)
    if max(w, h) > 2048:
        w, h = w * 2048 / max(w, h), h * 2048 / max(w, h)
    if min(w, h) > 768:
        w, h = w * 768 / min(w, h), h * 768 / min(w, h)
    return IMAGE_BASE + IMAGE_TILE * math.ceil(w / 512) * math.ceil(h / 512)


def audio_tokens(seconds: float) -> int:
    """Estimated tokens of ``seconds`` of audio."""
    return math.ceil(seconds * AUDIO_TOKENS_PER_SECOND)


def is_count(value: object) -> bool:
    """An int (not a bool) in 0..:data:`MAX_TOKENS`."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


def output_cap(config: Mapping[str, Any]) -> int | None:
    """The most completion tokens one request of ``config`` (a generation config or a
    request body) may produce: its smallest positive cap times ``n`` (None: no cap)."""
    caps = [v for k in CAP_KEYS if is_count(v := config.get(k)) and v > 0]
    if not caps:
        return None
    n = config.get("n")
    copies = n if is_count(n) and n > 1 else 1
    return min(min(caps) * copies, MAX_TOKENS)
