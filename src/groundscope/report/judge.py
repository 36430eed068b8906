"""The judge's part of a dataset report, rebuilt from the saved reviews.

From every judged score's decision (``scoring.judge.read_decision``: the verdict, each
judge's vote, the human label) it derives, per subset and OVERALL:

- how many judgements failed (``judge_failed``: no verdict after the bounded retries, or a
  tie between judges) — excluded from ``Accuracy`` and said in the summary line;
- with several judges, their agreement: the ``Judge agreement ↑`` row is the mean share of
  agreeing judge pairs per sample (plain and readable as a percentage); the JSON also has
  Fleiss' kappa (chance-corrected);
- with a human label column, judge vs human: accuracy (``Judge vs human ↑``), Cohen's kappa
  (``Judge vs human · κ``) and the 2x2 confusion matrix (rows: human correct / incorrect,
  columns: judge correct / incorrect).

Everything lands in ``DatasetReport.extra["judge"]`` and as extra metric rows.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from groundscope.metrics import OVERALL
from groundscope.report.model import DatasetReport, MetricRow
from groundscope.scoring.agreement import (
    cohen_kappa,
    fleiss_kappa,
    pairwise_agreement,
    versus_human,
)
from groundscope.scoring.judge import is_judged, judge_ids, read_decision
from groundscope.types import Score

if TYPE_CHECKING:
    from groundscope.config import JudgeConfig
    from groundscope.store import RunStore

JUDGE_AGREEMENT = "judge_agreement"
HUMAN_ACCURACY = "judge_human_accuracy"
HUMAN_KAPPA = "judge_human_kappa"


@dataclass
class JudgeStats:
    """What the judged scores of one subset (or several, pooled) say about the judge."""

    judged: int = 0
    failed: int = 0
    failures: dict[str, int] = field(default_factory=dict)
    votes: list[list[bool]] = field(default_factory=list)
    human: list[tuple[bool, bool]] = field(default_factory=list)

    def add(self, score: Score) -> None:
        decision = read_decision(score.detail)
        self.judged += 1
        if decision.failed:
            self.failed += 1
            self.failures[decision.failed] = self.failures.get(decision.failed, 0) + 1
        self.votes.append(list(decision.votes))
        if decision.verdict is not None and decision.human is not None:
            self.human.append((decision.human, decision.verdict))

    def merge(self, other: JudgeStats) -> None:
        self.judged += other.judged
        self.failed += other.failed
        for k, v in other.failures.items():
            self.failures[k] = self.failures.get(k, 0) + v
        self.votes += other.votes
        self.human += other.human

    def rows(self, subset: str) -> list[MetricRow]:
        out = []
        multi = [v for v in self.votes if len(v) >= 2]
        agreement = pairwise_agreement(multi)
        if agreement is not None:
            out.append(MetricRow(metric=JUDGE_AGREEMENT, subset=subset, num=len(multi),
                                 score=agreement))
        if self.human:
            hits = sum(h == j for h, j in self.human)
            out.append(MetricRow(metric=HUMAN_ACCURACY, subset=subset, num=len(self.human),
                                 score=hits / len(self.human)))
            out.append(MetricRow(metric=HUMAN_KAPPA, subset=subset, num=len(self.human),
                                 score=cohen_kappa(self.human)))
        return out

    def to_json(self) -> dict[str, Any]:
        multi = [v for v in self.votes if len(v) >= 2]
        out: dict[str, Any] = {"judged": self.judged, "judge_failed": self.failed,
                               "failures": dict(self.failures)}
        if multi:
            out["agreement"] = {"method": "mean pairwise agreement", "samples": len(multi),
                                "value": pairwise_agreement(multi),
                                "fleiss_kappa": fleiss_kappa(multi)}
        if self.human:
            out["human"] = versus_human(self.human, ("correct", "incorrect"))
        return out


def judged_scores(store: RunStore, dataset: str, subsets: Sequence[str]) -> dict[str, list[Score]]:
    """The saved scores that carry a judge decision, per subset (one per sample and repeat)."""
    from groundscope.rowcodec import score_from_json

    out: dict[str, list[Score]] = {}
    for subset in subsets:
        seen: set[tuple[str, int]] = set()
        rows = []
        for row in store.load_reviews(dataset, subset).values():
            score = score_from_json(row)
            key = (score.sample_id, score.repeat)
            if is_judged(score.detail) and key not in seen:
                seen.add(key)
                rows.append(score)
        out[subset] = rows
    return out


def with_judge_stats(rep: DatasetReport, judge: JudgeConfig | None,
                     scores: Mapping[str, Iterable[Score]]) -> DatasetReport:
    """``rep`` with ``extra["judge"]`` and the judge rows, when the run used an LLM judge."""
    if judge is None or judge.strategy not in ("llm", "llm_recall") or not judge.models:
        return rep
    total = JudgeStats()
    rows: list[MetricRow] = []
    for subset in rep.subsets:
        stats = JudgeStats()
        for score in scores.get(subset, ()):
            stats.add(score)
        rows += stats.rows(subset)
        total.merge(stats)
    if len(rep.subsets) > 1:
        rows += total.rows(OVERALL)
    rows.sort(key=lambda r: [JUDGE_AGREEMENT, HUMAN_ACCURACY, HUMAN_KAPPA].index(r.metric))
    # ``max_retries``: schema 1's key for the judge's repair turns (``judge.max_repairs``)
    extra = {"strategy": judge.strategy, "models": judge_ids(judge.models),
             "multimodal": judge.multimodal, "max_retries": judge.max_repairs, **total.to_json()}
    return rep.model_copy(update={"metrics": [*rep.metrics, *rows],
                                  "extra": {**rep.extra, "judge": extra}})


def add_judge_stats(rep: DatasetReport, judge: JudgeConfig | None, store: RunStore, *,
                    only: Mapping[str, set[tuple[str, int]]] | None = None) -> DatasetReport:
    """:func:`with_judge_stats` over the run directory's saved reviews (read only if needed);
    ``only``: per subset, the ``(sample id, repeat)`` to count (None: all)."""
    if judge is None or judge.strategy not in ("llm", "llm_recall") or not judge.models:
        return rep
    scores = judged_scores(store, rep.dataset, rep.subsets)
    return with_judge_stats(rep, judge, scores if only is None else planned_only(scores, only))


def planned_only(scores: Mapping[str, list[Score]],
                 only: Mapping[str, set[tuple[str, int]]]) -> dict[str, list[Score]]:
    """``scores`` of the ``(sample id, repeat)`` in ``only`` (per subset)."""
    return {subset: [s for s in rows if (s.sample_id, s.repeat) in only.get(subset, ())]
            for subset, rows in scores.items()}
