"""Scorers that consult the LLM judge panel: tiny adapters over ``JudgePanel.decide``.

- :class:`JudgedAccuracy` (strategy ``llm``): ``accuracy`` of a free-form answer is the
  panel's verdict (A = 1, B = 0); no verdict is ``judge_failed``, excluded from the mean.
  Multiple-choice samples keep exact letter matching (no judge call).
- :class:`RecallScorer` (strategy ``llm_recall``, EvalScope's meaning): the rule score
  stands when its main value is already > 0.99; otherwise the judge is asked and the main
  value becomes ``max(rule, verdict)`` — the judge can only *recover* a rule miss, never
  lower a score. When the judge gives no verdict the rule score stands (it is a real
  measurement) and the failure is recorded in ``detail``.

Example (no judge call is needed for an empty answer)::

    >>> import asyncio
    >>> from groundscope.config import JudgeConfig
    >>> from groundscope.scoring.base import ScoringContext
    >>> from groundscope.scoring.judge import judge_panel
    >>> from groundscope.types import Origin, Prediction, PredictionStatus, Completion, Sample
    >>> ctx = ScoringContext(judge=JudgeConfig(strategy="llm",
    ...     models=[{"model_id": "j", "api_url": "mock"}]))
    >>> scorer = JudgedAccuracy(judge_panel(ctx))
    >>> s = Sample("1", "d", "s", (), Origin("f", 1), target=("Dog",), question="What animal?")
    >>> p = Prediction("1", "h", PredictionStatus.OK, Completion(""))
    >>> score = asyncio.run(scorer.score(s, p))
    >>> score.status.value, dict(score.values)
    ('ok', {'accuracy': 0.0})
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from groundscope.scoring.base import ChoiceScorer, Scorer, unusable
from groundscope.scoring.judge import JudgePanel, Outcome
from groundscope.scoring.judge_prompt import judge_messages
from groundscope.scoring.requests import JudgeStep, RequestBound, TokenEstimate
from groundscope.types import AnswerKind, Prediction, Sample, Score, ScoreStatus
from groundscope.usage import step_of

RECALL_THRESHOLD = 0.99
CORRECTNESS = step_of("judge")  # the step ``summary.usage`` counts the panel's verdicts in


def correctness_step(panel: JudgePanel) -> JudgeStep:
    return JudgeStep(CORRECTNESS, panel.cfg.models, panel.cfg.max_repairs)


def correctness_bounds(panel: JudgePanel, sample: Sample, tokens: TokenEstimate
                       ) -> list[RequestBound]:
    """One ``decide`` of ``sample``: one request per judge model (J), for a sample with a
    reference; the prompt is the real one, quoting an answer (an empty answer makes none)."""
    if not any(t.strip() for t in sample.target):
        return []
    each = tokens.prompt(judge_messages(sample, "", multimodal=panel.cfg.multimodal)) \
        + tokens.answer
    return [RequestBound(CORRECTNESS, i, 1, each) for i in range(len(panel.cfg.models))]


def _no_reference(sample: Sample, prediction: Prediction, name: str) -> Score | None:
    if any(r.strip() for r in sample.target):
        return None
    return Score(sample.id, name, ScoreStatus.NO_ANSWER,
                 detail={"reason": "the record has no reference answer"}, repeat=prediction.repeat)


@dataclass(frozen=True, slots=True)
class JudgedAccuracy:
    """``accuracy`` by the judge panel for free-form answers (letter match for choices)."""

    panel: JudgePanel
    name: str = "accuracy"
    keys: tuple[str, ...] = ("accuracy",)
    choice: ChoiceScorer = field(default_factory=ChoiceScorer)

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        if sample.answer_kind is AnswerKind.CHOICE:
            return await self.choice.score(sample, prediction)
        bad = unusable(sample, prediction, self.name) or _no_reference(sample, prediction, self.name)
        if bad is not None:
            return bad
        outcome = await self.panel.decide(sample, prediction.text)
        return outcome_score(outcome, sample, prediction, self.name, "accuracy")

    def request_steps(self) -> list[JudgeStep]:
        return [correctness_step(self.panel)]

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> list[RequestBound]:
        """J per free-form sample with a reference; a multiple-choice sample is matched by
        its letter: 0."""
        if sample.answer_kind is not AnswerKind.FREE:
            return []
        return correctness_bounds(self.panel, sample, tokens)


def outcome_score(outcome: Outcome, sample: Sample, prediction: Prediction, name: str,
                  key: str) -> Score:
    """The Score of a panel decision: OK with 1/0 under ``key``, or ``judge_failed``."""
    if not outcome.ok:
        return Score(sample.id, name, ScoreStatus.JUDGE_FAILED, detail=outcome.detail(),
                     repeat=prediction.repeat)
    return Score(sample.id, name, ScoreStatus.OK, values={key: 1.0 if outcome.correct else 0.0},
                 extracted=outcome.label, detail=outcome.detail(), repeat=prediction.repeat)


@dataclass(frozen=True, slots=True)
class RecallScorer:
    """Wraps a rule scorer: the judge may raise its ``key`` value to 1 (``llm_recall``)."""

    inner: Scorer
    key: str
    panel: JudgePanel

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def keys(self) -> tuple[str, ...]:
        return self.inner.keys

    async def score(self, sample: Sample, prediction: Prediction) -> Score:
        rule = await self.inner.score(sample, prediction)
        value = rule.values.get(self.key)
        if rule.status is not ScoreStatus.OK or value is None or value > RECALL_THRESHOLD:
            return rule
        outcome = await self.panel.decide(sample, prediction.text)
        values = dict(rule.values)
        if outcome.ok:
            values[self.key] = max(value, 1.0 if outcome.correct else 0.0)
        detail = {**rule.detail, **outcome.detail(), "rule_value": value, "recall_key": self.key}
        return replace(rule, values=values, detail=detail)

    def request_steps(self) -> list[JudgeStep]:
        return [correctness_step(self.panel)]

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> list[RequestBound]:
        """J per sample with a reference (any answer kind: the rule score may miss)."""
        return correctness_bounds(self.panel, sample, tokens)
