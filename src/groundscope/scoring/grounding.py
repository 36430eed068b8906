"""Grounding and completeness: an answer's claims checked against the image.

:class:`GroundingScorer` (``metric_list: [grounding]``), per answer:

1. a judge extracts the answer's atomic, visually checkable claims (the question gives them
   context; ``{"claims": [...]}``, cached under ``claims``);
2. each claim is verified against the sample's images / videos (``verification.py``), one
   request per claim (``{"verdict", "reason"}``) or, with ``verify: batch``, all of the
   answer's claims in one request (an ordered verdict list), cached under ``verification``.
   Every grounding model casts ``votes`` votes; the claim's verdict is the strict majority
   of the votes cast, else ``not_determinable``; no vote at all makes the answer
   ``judge_failed``;
3. with S supported, C contradicted and N not-determinable claims, under the policy
   ``judge.grounding.not_determinable``:

   =============== ======================== =================
   policy          claims counted (n)        supported (s)
   =============== ======================== =================
   ``unsupported`` S + C + N (default)       S
   ``excluded``    S + C                     S
   ``supported``   S + C + N                 S + N
   =============== ======================== =================

   ``grounding`` = s / n (its mean over answers is the *macro* grounding),
   ``grounding_claims`` = s / n with weight n (aggregated as sum(s) / sum(n): *micro*),
   ``hallucination`` = (n - s) / n with weight n (claim level: unsupported / claims),
   ``hallucinated_answers`` = 1 if C >= 1 else 0 (answer level: a *contradicted* claim,
   whatever the policy).

   An answer with no checkable claim (an empty answer, a refusal, or only excluded claims)
   is ``no_answer`` with ``detail.no_claims``: counted separately, never scored 0.

Bounds (``judge.grounding``; an answer and its judge's reply are untrusted): a claim longer
than ``max_claim_chars`` (500) is invalid: never sent, counted in ``detail.claims_too_long``;
of the valid claims the first ``max_claims`` (32) are verified and the rest are counted in
``detail.claims_over_limit``, not sent (an answer of 5,000 claims costs 1 + 32 requests per
vote and model, not 5,001; in batch mode 1 + 1). ``detail.claims_extracted`` then says how
many the judge listed. The values are those of the verified claims; ``report/grounding.py``
totals what was cut.

:class:`CompletenessScorer` (``metric_list: [completeness]``): for a record with
``elements: [...]``, the judge lists the elements the answer mentions (``{"covered": [...]}``,
cached under ``completeness``); they are matched one-to-one to the expected elements
(verbatim first, then after normalisation; an unknown item is ignored and recorded), and
``completeness`` = matched / expected. A record without elements is ``no_answer``, and so
is one with more than ``max_elements`` (64) elements (``detail.too_many_elements``: not
scored rather than scored on part of its list, which would change what 1.0 means).

Every claim's verdict, reason and votes are kept in ``Score.detail["claims"]``. A record's
human labels (``dataset/labels.py``) are copied into the review (:func:`with_human_labels`)
for ``report/grounding.py`` to compare with the judge.

>>> tally(["supported", "contradicted", "not_determinable"], "unsupported")[0]["grounding"]
0.3333333333333333
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from groundscope.judgeconfig import GroundingConfig, JudgeConfig, JudgeModel
from groundscope.scoring.base import unusable
from groundscope.scoring.grounding_prompt import (
    CLAIMS_SHAPE,
    COMPLETENESS_SHAPE,
    claims_messages,
    completeness_messages,
    parse_claims,
    parse_covered,
    verify_batch_messages,
    verify_messages,
)
from groundscope.scoring.normalise import normalise_answer
from groundscope.scoring.requests import JudgeStep, RequestBound, TokenEstimate
from groundscope.scoring.verification import verify_claims
from groundscope.types import MediaRef, Modality, Prediction, Sample, Score, ScoreStatus

if TYPE_CHECKING:
    from groundscope.scoring.base import ScoringContext
    from groundscope.scoring.judge import JudgePanel

GROUNDING_KEYS = ("grounding", "grounding_claims", "hallucination", "hallucinated_answers")
RATIO_KEYS = ("grounding_claims", "hallucination")


def grounding_options(judge: JudgeConfig | None) -> GroundingConfig:
    """The run's grounding options (defaults when the judge block has no ``grounding``)."""
    return judge.grounding if judge is not None and judge.grounding else GroundingConfig()


def grounding_models(judge: JudgeConfig | None) -> list[JudgeModel]:
    """``judge.grounding.models`` when given, else the judge block's models."""
    if judge is None:
        return []
    return list(grounding_options(judge).models or judge.models)


def grounding_repairs(judge: JudgeConfig | None) -> int:
    """The repair turns a grounding step's broken reply gets: ``judge.grounding.max_repairs``
    when set, else the judge block's (``max_repairs``, default 2)."""
    judge = judge or JudgeConfig()
    opts = grounding_options(judge)
    return judge.max_repairs if opts.max_repairs is None else opts.max_repairs


def grounding_panel(ctx: ScoringContext) -> JudgePanel:
    """The run's panel for the grounding steps (its own models and retry budget)."""
    from groundscope.scoring.judge import JudgePanel

    def make() -> JudgePanel:
        judge = ctx.judge or JudgeConfig()
        cfg = JudgeConfig(strategy="llm", models=grounding_models(judge), multimodal=True,
                          max_repairs=grounding_repairs(judge),
                          max_reply_chars=judge.max_reply_chars)
        return JudgePanel(ctx, cfg)

    return ctx.shared("grounding:panel", make)


def visual_media(sample: Sample) -> tuple[MediaRef, ...]:
    """The images and videos a claim is verified against."""
    return tuple(m for m in sample.media() if m.kind in (Modality.IMAGE, Modality.VIDEO))


def tally(verdicts: Sequence[str], policy: str) -> tuple[dict[str, float], dict[str, float],
                                                        dict[str, Any]] | None:
    """``(values, weights, counts)`` of one answer's claim verdicts, None when no claim counts.

    >>> values, weights, counts = tally(["supported"] * 3 + ["contradicted"], "unsupported")
    >>> values["grounding"], values["hallucination"], values["hallucinated_answers"], weights
    (0.75, 0.25, 1.0, {'grounding_claims': 4.0, 'hallucination': 4.0})
    >>> tally(["not_determinable"], "excluded") is None
    True
    """
    c = Counter(verdicts)
    s, k, nd = c["supported"], c["contradicted"], c["not_determinable"]
    n = s + k + (0 if policy == "excluded" else nd)
    sup = s + (nd if policy == "supported" else 0)
    if n == 0:
        return None
    values = {"grounding": sup / n, "grounding_claims": sup / n,
              "hallucination": (n - sup) / n, "hallucinated_answers": 1.0 if k else 0.0}
    counts = {"supported": s, "contradicted": k, "not_determinable": nd, "counted": n,
              "counted_supported": sup, "policy": policy}
    return values, {key: float(n) for key in RATIO_KEYS}, counts


@dataclass(frozen=True, slots=True)
class GroundingScorer:
    """Claim-level grounding of a free-form answer (see the module docstring)."""

    panel: JudgePanel
    options: GroundingConfig
    name: str = "grounding"
    keys: tuple[str, ...] = GROUNDING_KEYS

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        score = await self._score(sample, prediction)
        return with_human_labels(score, sample.metadata)

    def request_steps(self) -> list[JudgeStep]:
        models, repairs = self.panel.cfg.models, self.panel.cfg.max_repairs
        return [JudgeStep("claims", models[:1], repairs),
                JudgeStep("verification", models, repairs)]

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> list[RequestBound]:
        """For a sample with an image or video: ``claims`` 1 (the first grounding model);
        ``verification`` K x V per grounding model (an answer's first K = ``max_claims``
        claims, each verified by every model V = ``votes`` times), or with ``verify: batch``
        V per model (one request per answer and vote) plus the per-claim fallback of a batch
        that still breaks its contract after its repairs (K x V). A claim is counted at
        ``max_claim_chars`` characters."""
        visual = visual_media(sample)
        if not visual:
            return []
        opts, k, v = self.options, self.options.max_claims, self.options.votes
        bounds = [RequestBound("claims", 0, 1,
                               tokens.prompt(claims_messages(sample.question, "")) + tokens.answer)]
        claim = tokens.chars(opts.max_claim_chars)
        if opts.verify == "batch":
            batch = tokens.prompt(verify_batch_messages([""] * k, visual)) + k * claim
            per_model = RequestBound("verification", 0, v, batch, fallback=v * k)
        else:
            per_model = RequestBound("verification", 0, k * v,
                                     tokens.prompt(verify_messages("", visual)) + claim)
        return bounds + [replace(per_model, model=i) for i in range(len(self.panel.cfg.models))]

    async def _score(self, sample: Sample, prediction: Prediction) -> Score:
        bad = unusable(sample, prediction, self.name)
        if bad is not None:
            return bad
        media = visual_media(sample)
        if not media:
            return self._status(sample, prediction, ScoreStatus.NO_ANSWER,
                                reason="the sample has no image or video to verify claims against")
        answer = prediction.text
        if not answer.strip():
            return self._no_claims(sample, prediction, "empty answer", [])
        extracted = await self.panel.ask(0, claims_messages(sample.question, answer),
                                         parse_claims, purpose="claims", shape=CLAIMS_SHAPE)
        if extracted.value is None:
            return self._status(sample, prediction, ScoreStatus.JUDGE_FAILED,
                                judge_failed=f"claim extraction: {extracted.error}",
                                stage="claims")
        claims, cut = bounded_claims(extracted.value, self.options)
        if not claims:
            reason = (f"every claim is longer than max_claim_chars ({self.options.max_claim_chars})"
                      if extracted.value else "no checkable claims")
            return self._no_claims(sample, prediction, reason, [], **cut)
        checks, fallbacks = await verify_claims(self.panel, self.options, claims, media)
        info: dict[str, Any] = dict(cut)
        if self.options.verify == "batch":
            info["verify"] = "batch"
            if fallbacks:
                info["batch_fallbacks"] = fallbacks
        failed = sum(c["verdict"] is None for c in checks)
        if failed:
            return self._status(sample, prediction, ScoreStatus.JUDGE_FAILED, claims=checks,
                                judge_failed=f"verification: {failed} of {len(checks)} claims "
                                             "got no verdict", stage="verification", **info)
        result = tally([c["verdict"] for c in checks], self.options.not_determinable)
        if result is None:
            return self._no_claims(sample, prediction,
                                   "no determinable claim (not_determinable is excluded)", checks,
                                   **info)
        values, weights, counts = result
        detail = {"claims": checks, "n_claims": len(checks), **counts, **info,
                  "grounding_score": values["grounding"],
                  "hallucination_rate": values["hallucination"]}
        return Score(sample.id, self.name, ScoreStatus.OK, values=values, weights=weights,
                     detail=detail, repeat=prediction.repeat)

    def _status(self, sample: Sample, prediction: Prediction, status: ScoreStatus,
                **detail: Any) -> Score:
        return Score(sample.id, self.name, status, detail=detail, repeat=prediction.repeat)

    def _no_claims(self, sample: Sample, prediction: Prediction, reason: str,
                   claims: list[dict[str, Any]], **cut: Any) -> Score:
        return self._status(sample, prediction, ScoreStatus.NO_ANSWER, no_claims=True,
                            reason=reason, claims=claims, n_claims=len(claims), **cut)


def with_human_labels(score: Score, metadata: Mapping[str, Any]) -> Score:
    """``score`` with the record's human labels in its detail (``dataset/labels.py``):
    ``human_hallucinated``, and each claim's ``human_verdict`` where a labelled claim equals
    it after normalisation (``human_claims``: the number labelled). ``report/grounding.py``
    compares them with the judge's.

    >>> s = Score("1", "grounding", ScoreStatus.OK, detail={"claims": [
    ...     {"claim": "The dog is brown.", "verdict": "supported"}]})
    >>> d = with_human_labels(s, {"human_hallucinated": False, "human_claims": [
    ...     {"claim": "the dog is brown", "verdict": "contradicted"}]}).detail
    >>> d["human_hallucinated"], d["human_claims"], d["claims"][0]["human_verdict"]
    (False, 1, 'contradicted')
    """
    flag, labelled = metadata.get("human_hallucinated"), metadata.get("human_claims") or ()
    if flag is None and not labelled:
        return score
    detail = dict(score.detail)
    if flag is not None:
        detail["human_hallucinated"] = bool(flag)
    if labelled:
        human = {normalise_answer(str(c["claim"])): c["verdict"] for c in labelled}
        detail["human_claims"] = len(labelled)
        claims = []
        for c in detail.get("claims") or ():
            verdict = human.get(normalise_answer(str(c["claim"])))
            claims.append(c if verdict is None else {**c, "human_verdict": verdict})
        if claims:
            detail["claims"] = claims
    return replace(score, detail=detail)


def bounded_claims(claims: Sequence[str], opts: GroundingConfig
                   ) -> tuple[list[str], dict[str, int]]:
    """The claims to verify, and the counts of those cut (empty when none was).

    >>> from groundscope.config import GroundingConfig
    >>> bounded_claims(["a" * 20, "b" * 600, "c" * 20, "d" * 20],
    ...                GroundingConfig(max_claims=2, max_claim_chars=500))[1]
    {'claims_extracted': 4, 'claims_too_long': 1, 'claims_over_limit': 1}
    """
    valid = [c for c in claims if len(c) <= opts.max_claim_chars]
    kept = valid[:opts.max_claims]
    if len(kept) == len(claims):
        return kept, {}
    return kept, {"claims_extracted": len(claims), "claims_too_long": len(claims) - len(valid),
                  "claims_over_limit": len(valid) - len(kept)}


def match_elements(expected: Sequence[str], covered: Sequence[str]
                   ) -> tuple[list[dict[str, Any]], list[str]]:
    """One-to-one match of the judge's covered items to the expected elements.

    Each item takes the first still unmatched element equal to it verbatim, else equal after
    normalisation; an item matching nothing is returned as unrecognised.

    >>> matches, unknown = match_elements(["a dog", "grass", "a dog"], ["A dog", "sky"])
    >>> [m["covered"] for m in matches], unknown
    ([True, False, False], ['sky'])
    """
    taken = [False] * len(expected)
    loose = [normalise_answer(e) for e in expected]
    unknown: list[str] = []
    for item in covered:
        free = [i for i in range(len(expected)) if not taken[i]]
        hit = next((i for i in free if expected[i] == item), None)
        if hit is None:
            norm = normalise_answer(item)
            hit = next((i for i in free if loose[i] == norm), None)
        if hit is None:
            unknown.append(item)
        else:
            taken[hit] = True
    return [{"element": e, "covered": t} for e, t in zip(expected, taken, strict=True)], unknown


@dataclass(frozen=True, slots=True)
class CompletenessScorer:
    """Share of a record's expected visual ``elements`` the answer mentions."""

    panel: JudgePanel
    max_elements: int = 64
    name: str = "completeness"
    keys: tuple[str, ...] = field(default=("completeness",))

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        bad = unusable(sample, prediction, self.name)
        if bad is not None:
            return bad
        elements = [str(e) for e in sample.metadata.get("elements") or ()]
        if not elements:
            return Score(sample.id, self.name, ScoreStatus.NO_ANSWER,
                         detail={"reason": "the record lists no expected elements"},
                         repeat=prediction.repeat)
        if len(elements) > self.max_elements:
            reason = (f"the record lists {len(elements)} expected elements, over "
                      f"judge.grounding.max_elements ({self.max_elements}): not scored")
            return Score(sample.id, self.name, ScoreStatus.NO_ANSWER, repeat=prediction.repeat,
                         detail={"reason": reason, "too_many_elements": len(elements)})
        answer = prediction.text
        covered: list[str] = []
        if answer.strip():  # an empty answer mentions nothing: no call
            reply = await self.panel.ask(0, completeness_messages(answer, elements),
                                         parse_covered, purpose="completeness",
                                         shape=COMPLETENESS_SHAPE)
            if reply.value is None:
                return Score(sample.id, self.name, ScoreStatus.JUDGE_FAILED,
                             detail={"judge_failed": f"completeness: {reply.error}"},
                             repeat=prediction.repeat)
            covered = reply.value
        matches, unknown = match_elements(elements, covered)
        hits = sum(m["covered"] for m in matches)
        detail: dict[str, Any] = {"elements": matches, "covered": hits, "expected": len(elements)}
        if unknown:
            detail["unrecognised"] = unknown
        return Score(sample.id, self.name, ScoreStatus.OK,
                     values={"completeness": hits / len(elements)}, detail=detail,
                     repeat=prediction.repeat)

    def request_steps(self) -> list[JudgeStep]:
        return [JudgeStep("completeness", self.panel.cfg.models[:1], self.panel.cfg.max_repairs)]

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> list[RequestBound]:
        """1 (the first grounding model) for a record with 1..``max_elements`` expected
        elements (an empty answer makes none)."""
        elements = [str(e) for e in sample.metadata.get("elements") or ()]
        if not 1 <= len(elements) <= self.max_elements:
            return []
        return [RequestBound("completeness", 0, 1, tokens.prompt(
            completeness_messages("", elements)) + tokens.answer)]
