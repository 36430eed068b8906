"""What a request is charged against a tokens-a-minute limit before it is sent (pure).

OpenAI counts a request's tokens against TPM before answering it; the client's gate
(``client/gate.py``, ``client/ratelimit.py``'s token bucket) charges this estimate and
corrects it from the reply's ``usage``. The rules are the dry-run's (``groundscope/tokens.py``),
applied to what a body shows: its texts, one message overhead per message (``system`` and
``instructions`` count as one), images at unknown size (1024x1024; 85 at ``detail: low``),
a ``video_url`` part as a whole video, base64 audio by its WAV header or its size, plus the
output reserved (the smallest cap times ``n``).
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from groundscope.media.probe import WAV_HEAD, audio_seconds
from groundscope.tokens import (
    CAP_KEYS,
    MAX_TOKENS,
    MESSAGE_TOKENS,
    REPLY_TOKENS,
    VIDEO_TOKENS,
    audio_tokens,
    image_tokens,
    output_cap,
    text_tokens,
)

_TEXT_KEYS = frozenset({"text", "content", "system", "instructions", "input", "arguments"})
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})
_AUDIO_MIN_CHARS = 256  # a longer "data" string is base64 audio (images are counted as parts)
_B64_HEAD = (WAV_HEAD + 2) // 3 * 4  # the base64 characters of a WAV header's bytes
_MAX_DEPTH = 64


@dataclass
class _Count:
    tokens: int = 0


def _audio(data: str) -> int:
    nbytes = len(data) * 3 // 4
    try:
        head = base64.b64decode(data[:_B64_HEAD])
    except (binascii.Error, ValueError):
        head = b""
    return audio_tokens(audio_seconds(head, nbytes))


def _walk(node: Any, key: str, count: _Count, depth: int) -> None:
    if depth > _MAX_DEPTH:
        return
    if isinstance(node, str):
        if key in _TEXT_KEYS:
            count.tokens += text_tokens(node)
        elif key == "data" and len(node) > _AUDIO_MIN_CHARS:
            count.tokens += _audio(node)
        return
    if isinstance(node, Mapping):
        kind = node.get("type")
        if kind in _IMAGE_TYPES:
            inner = node.get("image_url")
            detail = inner.get("detail") if isinstance(inner, Mapping) else node.get("detail")
            count.tokens += image_tokens(None, None, detail if isinstance(detail, str) else None)
            return
        if kind == "video_url":
            count.tokens += VIDEO_TOKENS
            return
        for k, v in node.items():
            _walk(v, str(k), count, depth + 1)
    elif isinstance(node, list | tuple):
        for v in node:
            _walk(v, key, count, depth + 1)


def _messages(body: Mapping[str, Any]) -> int:
    """The messages of a body: chat's and Anthropic's ``messages``, the Responses API's
    ``input`` (a string: one), and a separate ``system`` / ``instructions`` (one each)."""
    n = 0
    for key in ("messages", "input"):
        value = body.get(key)
        n += len(value) if isinstance(value, list) else 1 if isinstance(value, str) else 0
    return n + sum(1 for key in ("system", "instructions") if body.get(key))


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """The tokens a request body will be charged before sending (see the module docstring).

    >>> estimate_tokens({"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 50})
    156
    """
    count = _Count(REPLY_TOKENS + MESSAGE_TOKENS * _messages(body))
    for k, v in body.items():
        if k not in CAP_KEYS:
            _walk(v, str(k), count, 0)
    return min(count.tokens + (output_cap(body) or 0), MAX_TOKENS)
