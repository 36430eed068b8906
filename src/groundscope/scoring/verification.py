"""Claim verification: each claim's verdict from every grounding model's votes, asked one
claim per request (``judge.grounding.verify: per_claim``, the default) or all of an answer's
claims in one request (``verify: batch``).

A *slot* is one grounding model and one of its ``votes`` (votes after the first use
``vote_temperature`` and a per-vote ``seed``). A claim's verdict is the strict majority of
the votes its slots cast, else ``not_determinable``; a claim no slot voted on has no verdict
(the answer is ``judge_failed``). Both modes give the same per-claim record
(``claim``, ``verdict``, ``reason`` or ``error``, ``votes`` when there are several slots).

- ``per_claim``: a slot sends one request per claim (``grounding_prompt.verify_messages``,
  read by ``parse_check``).
- ``batch``: a slot sends one request with the answer's N claims numbered
  (``verify_batch_messages``), whose reply must list exactly N verdicts in claim order
  (``parse_checks``); a broken reply gets the same repair turns (``max_repairs``) as a
  per-claim one. A slot whose batch still breaks the contract after them (a wrong count or
  order, an unknown verdict, no JSON, a reply over ``max_reply_chars``) **falls back**: its
  claims are asked one per request, as in ``per_claim``, so the answer is still scored; the
  fallback (judge, vote, the contract error) is kept in ``Score.detail["batch_fallbacks"]``
  and counted in the report (``extra.grounding``). A batch that failed otherwise (transport,
  an unavailable judge, media) casts no vote, as a failed per-claim request does.

Requests per answer of N claims (after the bounds), M models, V votes, R = ``max_repairs``:

=============== ========== ==========================================================
mode            no repair  at most
=============== ========== ==========================================================
``per_claim``   M·V·N      M·V·N·(R+1)
``batch``       M·V        M·V·(R+1) + M·V·N·(R+1) (every slot fell back)
=============== ========== ==========================================================

Both modes are the judge step ``verification`` and cache under it
(``cache/verification.jsonl``), so a resumed run or ``groundscope score`` repeats no call.

>>> majority_verdict([("supported", "a"), ("supported", "b"), ("contradicted", "c")])
('supported', 'a')
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

from groundscope.scoring.grounding_prompt import (
    VERIFY_SHAPE,
    Check,
    parse_check,
    parse_checks,
    verify_batch_messages,
    verify_batch_shape,
    verify_messages,
)
from groundscope.scoring.judge import Reply
from groundscope.types import MediaRef

if TYPE_CHECKING:
    from groundscope.config import GroundingConfig
    from groundscope.scoring.judge import JudgePanel

log = logging.getLogger("groundscope")

PURPOSE = "verification"
Slot = tuple[int, int, dict[str, Any]]  # (judge index, vote, generation overrides)
SlotReplies = tuple[list[Reply[Check]], dict[str, Any] | None]  # per claim; the fallback


def majority_verdict(cast: Sequence[tuple[str, str]]) -> tuple[str, str]:
    """``(verdict, reason)`` from ``(verdict, reason)`` votes: the strict majority, else
    ``not_determinable`` (conservative).

    >>> majority_verdict([("supported", "a"), ("contradicted", "c")])[0]
    'not_determinable'
    """
    counts = Counter(v for v, _ in cast)
    top, n = counts.most_common(1)[0]
    if n * 2 > len(cast):
        return top, next(r for v, r in cast if v == top)
    split = ", ".join(f"{v} {counts[v]}" for v in sorted(counts))
    return "not_determinable", f"no majority among {len(cast)} votes ({split})"


def slots(panel: JudgePanel, opts: GroundingConfig) -> list[Slot]:
    """Every (judge, vote) that verifies a claim, in the order their votes are listed."""
    variants: list[dict[str, Any]] = [{}] if opts.votes == 1 else [
        {"temperature": opts.vote_temperature, "seed": k} for k in range(opts.votes)]
    return [(i, k, v) for i in range(len(panel.ids)) for k, v in enumerate(variants)]


async def verify_claims(panel: JudgePanel, opts: GroundingConfig, claims: Sequence[str],
                        media: Sequence[MediaRef]
                        ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Each claim's record (``verdict`` None: no vote was cast), and the batch fallbacks."""
    ask = _batch_slot if opts.verify == "batch" else _per_claim_slot
    asked = await asyncio.gather(*(ask(panel, s, claims, media) for s in slots(panel, opts)))
    fallbacks = [f for _, f in asked if f is not None]
    return [combine(claim, [replies[n] for replies, _ in asked])
            for n, claim in enumerate(claims)], fallbacks


def combine(claim: str, replies: Sequence[Reply[Check]]) -> dict[str, Any]:
    """One claim's record from its slots' replies (majority of the votes cast)."""
    cast = [(r.value.verdict, r.value.reason) for r in replies if r.value is not None]
    out: dict[str, Any] = {"claim": claim}
    if cast:
        out["verdict"], out["reason"] = majority_verdict(cast)
    else:
        out["verdict"], out["error"] = None, replies[0].error
    if len(replies) > 1:
        out["votes"] = [{"judge": r.judge, "verdict": r.value.verdict if r.value else None,
                         "reason": r.value.reason if r.value else r.error} for r in replies]
    return out


async def _per_claim_slot(panel: JudgePanel, slot: Slot, claims: Sequence[str],
                          media: Sequence[MediaRef]) -> SlotReplies:
    i, _, overrides = slot
    replies = await asyncio.gather(*(
        panel.ask(i, verify_messages(claim, media), parse_check, purpose=PURPOSE,
                  shape=VERIFY_SHAPE, overrides=overrides) for claim in claims))
    return list(replies), None


async def _batch_slot(panel: JudgePanel, slot: Slot, claims: Sequence[str],
                      media: Sequence[MediaRef]) -> SlotReplies:
    i, vote, overrides = slot
    n = len(claims)
    reply = await panel.ask(i, verify_batch_messages(claims, media),
                            partial(parse_checks, count=n), purpose=PURPOSE,
                            shape=verify_batch_shape(n), overrides=overrides)
    if reply.value is not None:
        return [Reply(reply.judge, check, reply.attempts) for check in reply.value], None
    if not reply.broke_contract:  # no reply to repair: no vote, as per claim
        return [Reply(reply.judge, None, reply.attempts, reply.error)] * n, None
    log.info("judge %s: batch verification of %d claims broke its contract (%s); verifying "
             "them one per request", reply.judge, n, reply.error)
    replies, _ = await _per_claim_slot(panel, slot, claims, media)
    return replies, {"judge": reply.judge, "vote": vote, "claims": n, "error": reply.error}
