"""The grounding metrics' part of a dataset report, rebuilt from the saved reviews.

The metric rows (``Grounding ↑`` ... ``Consistent and correct ↑``) come from the metric
accumulator like every other metric. This module adds the counts behind them to
``DatasetReport.extra["grounding"]``, per subset and overall, so a reader can see what each
number rests on: answers scored, answers with no checkable claims (counted here, never
scored 0), judge failures, claim verdict totals (and the contradicted share, which does not
depend on the ``not_determinable`` policy), batch verifications that broke their contract
and were verified per claim instead (``batch_fallbacks``: answers, batches), completeness
element totals, and how many consistency groups were scored, fully consistent, too small or
failed.

With human labels in the reviews (``dataset/labels.py``), it adds the rows ``Grounding judge
vs human ↑`` (accuracy) and ``· κ ↑`` (Cohen's kappa) of the answer-level hallucinated verdict,
per subset and OVERALL, and ``extra["grounding"]["human"]``: the confusion matrix (rows human,
columns judge, hallucinated first), labelled answers not scored, and claim-level agreement
(labelled, matched to a judge claim, agreeing).

It also shows the fan-out bounds in force (``bounds``: ``max_claims``, ``max_claim_chars``,
``max_elements``, ``max_group_size``, ``max_reply_chars``, and ``max_repairs`` under the
report's schema-1 key ``max_retries``) and everything they cut (``cut``: claims not
verified because an answer had too many or they were too long, records with too many
elements, group members and references left out), never silently:
:func:`report.table.cut_notes` words the non-zero ones for the terminal summary and the
HTML page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from groundscope.metrics import OVERALL
from groundscope.report.model import MetricRow
from groundscope.scoring.agreement import versus_human
from groundscope.types import Score, ScoreStatus

if TYPE_CHECKING:
    from groundscope.config import JudgeConfig
    from groundscope.report.model import DatasetReport
    from groundscope.store import RunStore

_SCORERS = ("grounding", "completeness", "consistency_group")
_KEYS = frozenset({"grounding", "grounding_claims", "hallucination", "hallucinated_answers",
                   "completeness", "consistency", "consistent_correct"})


HUMAN_ACCURACY = "grounding_human_accuracy"
HUMAN_KAPPA = "grounding_human_kappa"
_CUT_KEYS = ("claims_over_limit", "claims_too_long", "members_over_limit",
             "references_over_limit")


def _count(c: Counter[str], score: Score) -> None:
    d, status = score.detail, score.status
    for key in _CUT_KEYS:
        c[key] += int(d.get(key, 0))
    if d.get("claims_over_limit") or d.get("claims_too_long"):
        c["answers_cut"] += 1
    if score.scorer == "grounding":
        fallbacks = len(d.get("batch_fallbacks", ()))
        c["batch_fallbacks"] += fallbacks
        c["answers_batch_fallback"] += int(fallbacks > 0)
        _count_human(c, score)
        if status is ScoreStatus.OK:
            c["answers"] += 1
            c["hallucinated"] += int(d.get("contradicted", 0) > 0)
            for key in ("supported", "contradicted", "not_determinable"):
                c[key] += int(d.get(key, 0))
            c["claims"] += int(d.get("n_claims", 0))
        elif d.get("no_claims"):
            c["no_claims"] += 1
        else:
            c[f"grounding_{status.value}"] += 1
    elif score.scorer == "completeness":
        if d.get("too_many_elements"):
            c["records_over_elements"] += 1
        elif status is ScoreStatus.OK:
            c["completeness_answers"] += 1
            c["elements"] += int(d.get("expected", 0))
            c["covered"] += int(d.get("covered", 0))
        else:
            c[f"completeness_{status.value}"] += 1
    elif status is ScoreStatus.OK:
        c["groups"] += 1
        c["all_agree"] += int(score.values.get("consistency") == 1.0)
        c["judged_pairs"] += sum(p.get("by") == "judge" for p in d.get("pairs", ()))
    else:
        c[f"groups_{status.value}"] += 1


def _count_human(c: Counter[str], score: Score) -> None:
    """The human labels of one grounding review (``scoring.grounding.with_human_labels``):
    the confusion cell of a scored answer (``human_<h><j>``, 1 = hallucinated), labelled
    answers not scored, and labelled / matched / agreeing claims."""
    d = score.detail
    human = d.get("human_hallucinated")
    if isinstance(human, bool):
        if score.status is ScoreStatus.OK:
            judge = score.values.get("hallucinated_answers") == 1.0
            c[f"human_{int(human)}{int(judge)}"] += 1
        else:
            c["human_unscored"] += 1
    labelled = d.get("human_claims")
    if isinstance(labelled, int) and not isinstance(labelled, bool):
        c["human_claims"] += labelled
    for claim in d.get("claims") or ():
        if isinstance(claim, Mapping) and claim.get("human_verdict") and claim.get("verdict"):
            c["human_claims_matched"] += 1
            c["human_claims_agree"] += int(claim["human_verdict"] == claim["verdict"])


def human_pairs(c: Counter[str]) -> list[tuple[bool, bool]]:
    """The ``(human, judge)`` hallucinated-answer pairs behind the confusion counts."""
    return [(h == 1, j == 1) for h in (1, 0) for j in (1, 0) for _ in range(c[f"human_{h}{j}"])]


def _human_block(c: Counter[str]) -> dict[str, Any]:
    out = versus_human(human_pairs(c), ("hallucinated", "not hallucinated"))
    matched = c["human_claims_matched"]
    return {**out, "labelled_not_scored": c["human_unscored"],
            "claims": {"labelled": c["human_claims"], "matched": matched,
                       "agree": c["human_claims_agree"],
                       "accuracy": c["human_claims_agree"] / matched if matched else None}}


def _human_rows(c: Counter[str], subset: str) -> list[MetricRow]:
    pairs = human_pairs(c)
    if not pairs:
        return []
    out = versus_human(pairs, ("hallucinated", "not hallucinated"))
    return [MetricRow(metric=HUMAN_ACCURACY, subset=subset, num=len(pairs), score=out["accuracy"]),
            MetricRow(metric=HUMAN_KAPPA, subset=subset, num=len(pairs), score=out["cohen_kappa"])]


def _block(c: Counter[str]) -> dict[str, Any]:
    claims = c["claims"]
    return {
        "answers": c["answers"], "no_claims": c["no_claims"],
        "judge_failed": c["grounding_judge_failed"], "errored": c["grounding_error"],
        "no_media": c["grounding_no_answer"],
        "claims": claims, "supported": c["supported"], "contradicted": c["contradicted"],
        "not_determinable": c["not_determinable"],
        "contradicted_claims_rate": c["contradicted"] / claims if claims else None,
        "hallucinated_answers": c["hallucinated"],
        "batch_fallbacks": {"answers": c["answers_batch_fallback"],
                            "batches": c["batch_fallbacks"]},
        "completeness": {"answers": c["completeness_answers"],
                         "no_elements": c["completeness_no_answer"],
                         "judge_failed": c["completeness_judge_failed"],
                         "errored": c["completeness_error"],
                         "elements": c["elements"], "covered": c["covered"]},
        "consistency": {"groups": c["groups"], "all_agree": c["all_agree"],
                        "too_small": c["groups_no_answer"],
                        "judge_failed": c["groups_judge_failed"],
                        "judged_pairs": c["judged_pairs"]},
        "cut": {"answers_with_claims_cut": c["answers_cut"],
                "claims_over_max_claims": c["claims_over_limit"],
                "claims_over_max_claim_chars": c["claims_too_long"],
                "records_over_max_elements": c["records_over_elements"],
                "group_members_over_max_group_size": c["members_over_limit"],
                "references_over_max_references": c["references_over_limit"]},
    }


def with_grounding_stats(rep: DatasetReport, judge: JudgeConfig | None,
                         scores: Mapping[str, Iterable[Score]]) -> DatasetReport:
    """``rep`` with ``extra["grounding"]`` when it has grounding metric rows."""
    if not _KEYS & {r.metric for r in rep.metrics}:
        return rep
    total: Counter[str] = Counter()
    subsets = {}
    rows: list[MetricRow] = []
    for subset in rep.subsets:
        c: Counter[str] = Counter()
        for score in scores.get(subset, ()):
            if score.scorer in _SCORERS:
                _count(c, score)
        subsets[subset] = _block(c)
        rows += _human_rows(c, subset)
        total.update(c)
    if len(rep.subsets) > 1:
        rows += _human_rows(total, OVERALL)
    rows.sort(key=lambda r: r.metric != HUMAN_ACCURACY)
    # the grounding scorer and the judge: imported only where a report has their rows
    from groundscope.scoring.grounding import grounding_models, grounding_options, grounding_repairs
    from groundscope.scoring.judge import judge_ids

    opts = grounding_options(judge)
    bounds = {"max_claims": opts.max_claims, "max_claim_chars": opts.max_claim_chars,
              "max_elements": opts.max_elements, "max_group_size": opts.max_group_size,
              "max_reply_chars": judge.max_reply_chars if judge is not None else None,
              "max_retries": grounding_repairs(judge)}
    extra = {"policy": {"not_determinable": opts.not_determinable}, "votes": opts.votes,
             "verify": opts.verify,
             "models": judge_ids(grounding_models(judge)), "bounds": bounds,
             "subsets": subsets, "overall": _block(total)}
    if any(k.startswith("human_") for k in total):
        extra["human"] = _human_block(total)
    return rep.model_copy(update={"metrics": [*rep.metrics, *rows],
                                  "extra": {**rep.extra, "grounding": extra}})


def add_grounding_stats(rep: DatasetReport, judge: JudgeConfig | None, store: RunStore, *,
                        only: Mapping[str, set[tuple[str, int]]] | None = None) -> DatasetReport:
    """:func:`with_grounding_stats` over the run directory's saved reviews; ``only``: per
    subset, the ``(sample id, repeat)`` to count (None: all)."""
    if not _KEYS & {r.metric for r in rep.metrics}:
        return rep
    from groundscope.rowcodec import score_from_json

    scores = {s: [score_from_json(r) for r in store.load_reviews(rep.dataset, s).values()]
              for s in rep.subsets}
    if only is not None:
        scores = {s: [x for x in rows if (x.sample_id, x.repeat) in only.get(s, ())]
                  for s, rows in scores.items()}
    return with_grounding_stats(rep, judge, scores)
