"""What the simulated model does with the generation settings, as the real APIs do.

- ``max_tokens`` (chat; ``max_completion_tokens`` too), ``max_output_tokens`` (Responses) and
  Anthropic's ``max_tokens`` cut a longer answer at that many tokens (about 4 characters
  each) with finish ``length`` (Anthropic ``stop_reason: max_tokens``, Responses ``status:
  incomplete``, ``max_output_tokens``): :func:`fit`.
- An Anthropic request with ``thinking`` enabled (``{"type": "enabled", "budget_tokens":
  N}`` or ``{"type": "adaptive"}``) is answered with a thinking block before the text.
- Anthropic's request rules (:func:`check_messages`), as the API states them:
  ``budget_tokens`` is at least 1024 and below ``max_tokens``; with thinking on,
  ``temperature`` may only be 1 and ``top_k`` is not accepted, ``top_p`` only from 0.95 to 1
  (Anthropic's extended-thinking guide: thinking "isn't compatible with temperature, top_p,
  or top_k modifications"; the API's words: "`temperature` may only be set to 1 when
  thinking is enabled"). Under ``anthropic-version`` ``2026-10-21`` or later (the default of
  the ``anthropic`` SDK 2.x, whose ``MessageCreateParams`` have no ``temperature``,
  ``top_p`` or ``top_k``) those three keys are unknown fields and refused; under
  ``2023-06-01``, the version groundscope pins, they are accepted.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from groundscope.simulator.limits import reserved
from groundscope.simulator.wire import BadRequest, SimReply

SAMPLING_REMOVED_IN = "2026-10-21"  # anthropic-version without temperature / top_p / top_k
MIN_THINKING_BUDGET = 1024
CHARS_PER_TOKEN = 4


def thinking_on(body: Mapping[str, Any]) -> bool:
    """Whether an Anthropic body (or its chat form) asks for extended thinking."""
    thinking = body.get("thinking")
    return isinstance(thinking, Mapping) and thinking.get("type") in ("enabled", "adaptive")


def check_messages(body: Mapping[str, Any], version: str) -> None:
    """Refuse what the Messages API refuses of ``thinking`` and the sampling keys."""
    sampling = [k for k in ("temperature", "top_p", "top_k") if k in body]
    if version >= SAMPLING_REMOVED_IN and sampling:
        raise BadRequest(f"{sampling[0]}: Extra inputs are not permitted (anthropic-version "
                         f"{version})")
    thinking = body.get("thinking")
    if thinking is None:
        return
    kind = thinking.get("type") if isinstance(thinking, Mapping) else None
    if kind not in ("enabled", "disabled", "adaptive"):
        raise BadRequest("thinking.type: Input should be 'enabled', 'disabled' or 'adaptive'")
    if kind == "disabled":
        return
    budget = thinking.get("budget_tokens")
    if kind == "enabled" and (not isinstance(budget, int) or isinstance(budget, bool)
                              or budget < MIN_THINKING_BUDGET):
        raise BadRequest("thinking.enabled.budget_tokens: Input should be greater than or "
                         f"equal to {MIN_THINKING_BUDGET}")
    if kind == "enabled" and budget >= body.get("max_tokens", 0):
        raise BadRequest("`max_tokens` must be greater than `thinking.budget_tokens`")
    if body.get("temperature", 1) != 1:
        raise BadRequest("`temperature` may only be set to 1 when thinking is enabled.")
    if "top_k" in body:
        raise BadRequest("`top_k` is not supported when thinking is enabled.")
    top_p = body.get("top_p", 1)
    if not isinstance(top_p, int | float) or not 0.95 <= top_p <= 1:
        raise BadRequest("`top_p` must be between 0.95 and 1 when thinking is enabled.")


def fit(body: Mapping[str, Any], reply: SimReply) -> SimReply:
    """``reply`` as the request's settings shape it: a thinking block when asked for, and
    cut to the output limit (finish ``length``)."""
    if thinking_on(body) and reply.reasoning is None:
        reply = dataclasses.replace(reply, reasoning="Looking at the question and what it "
                                                     "shows before answering.")
    limit = reserved(dict(body))
    if limit and len(reply.content) > limit * CHARS_PER_TOKEN:
        reply = dataclasses.replace(reply, content=reply.content[:limit * CHARS_PER_TOKEN],
                                    finish_reason="length")
    return reply
