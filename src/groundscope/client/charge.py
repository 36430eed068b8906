"""What a request is charged against a tokens-a-minute limit before it is sent (pure).

OpenAI counts a request's tokens against TPM before answering it; the client's gate
(``client/gate.py``, ``client/ratelimit.py``'s token bucket) charges the same estimate and
corrects it from the reply's ``usage``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

IMAGE_TOKENS = 765  # an image at detail high/auto: 1024x1024 by OpenAI's tile formula
LOW_DETAIL_TOKENS = 85
AUDIO_TOKENS_PER_KB = 1  # audio: ~10 tokens a second; 16 kHz wav is 32 KB a second
_MAX_COUNT = 10**12
_TEXT_KEYS = frozenset({"text", "content", "system", "instructions", "input", "arguments"})
_IMAGE_TYPES = frozenset({"image_url", "image", "input_image"})
_OUTPUT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


def _walk(node: Any, key: str, counts: list[int], depth: int) -> None:
    if depth > 64:
        return
    if isinstance(node, str):
        if key in _TEXT_KEYS:
            counts[0] += len(node)
        elif key == "data" and len(node) > 256:  # base64 audio (images are counted as parts)
            counts[2] += len(node)
        return
    if isinstance(node, Mapping):
        kind = node.get("type")
        if kind in _IMAGE_TYPES:
            inner = node.get("image_url")
            detail = inner.get("detail") if isinstance(inner, Mapping) else node.get("detail")
            counts[1] += LOW_DETAIL_TOKENS if detail == "low" else IMAGE_TOKENS
            return
        for k, v in node.items():
            _walk(v, str(k), counts, depth + 1)
    elif isinstance(node, list | tuple):
        for v in node:
            _walk(v, key, counts, depth + 1)


def estimate_tokens(body: Mapping[str, Any]) -> int:
    """The tokens a request body will be charged, as OpenAI counts TPM before sending: text
    characters / 4, a per-image estimate (85 at ``detail: low``, else 765), audio by size,
    plus the output reserved (``max_completion_tokens`` / ``max_tokens`` /
    ``max_output_tokens``), times ``n``.

    >>> estimate_tokens({"messages": [{"role": "user", "content": "x" * 400}], "max_tokens": 50})
    150
    """
    counts = [0, 0, 0]
    for k, v in body.items():
        if k not in _OUTPUT_KEYS:
            _walk(v, str(k), counts, 0)
    prompt = math.ceil(counts[0] / 4) + counts[1] + AUDIO_TOKENS_PER_KB * (counts[2] // 1365)
    reserved = next((v for k in _OUTPUT_KEYS if _is_count(v := body.get(k))), 0)
    n = body.get("n")
    copies = min(n, 128) if _is_count(n) and n >= 1 else 1
    return min(copies * (prompt + int(reserved)), _MAX_COUNT)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_COUNT
