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

It also shows the fan-out bounds in force (``bounds``: ``max_claims``, ``max_claim_chars``,
``max_elements``, ``max_group_size``, ``max_reply_chars``, ``max_retries``) and everything
they cut (``cut``: claims not verified because an answer had too many or they were too long,
records with too many elements, group members and references left out), never silently:
:func:`report.table.cut_notes` words the non-zero ones for the terminal summary and the
HTML page.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from groundscope.types import Score, ScoreStatus

if TYPE_CHECKING:
    from groundscope.config import JudgeConfig
    from groundscope.report.model import DatasetReport
    from groundscope.store import RunStore

_SCORERS = ("grounding", "completeness", "consistency_group")
_KEYS = frozenset({"grounding", "grounding_claims", "hallucination", "hallucinated_answers",
                   "completeness", "consistency", "consistent_correct"})


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
    from groundscope.scoring.grounding import grounding_models, grounding_options
    from groundscope.scoring.judge import judge_ids

    total: Counter[str] = Counter()
    subsets = {}
    for subset in rep.subsets:
        c: Counter[str] = Counter()
        for score in scores.get(subset, ()):
            if score.scorer in _SCORERS:
                _count(c, score)
        subsets[subset] = _block(c)
        total.update(c)
    opts = grounding_options(judge)
    retries = opts.max_retries if opts.max_retries is not None else \
        judge.max_retries if judge is not None else 2
    bounds = {"max_claims": opts.max_claims, "max_claim_chars": opts.max_claim_chars,
              "max_elements": opts.max_elements, "max_group_size": opts.max_group_size,
              "max_reply_chars": judge.max_reply_chars if judge is not None else None,
              "max_retries": retries}
    extra = {"policy": {"not_determinable": opts.not_determinable}, "votes": opts.votes,
             "verify": opts.verify,
             "models": judge_ids(grounding_models(judge)), "bounds": bounds,
             "subsets": subsets, "overall": _block(total)}
    return rep.model_copy(update={"extra": {**rep.extra, "grounding": extra}})


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
