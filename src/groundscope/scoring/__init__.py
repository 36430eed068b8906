"""Scorers: the registry that turns ``metric_list`` names into scorer objects.

With a judge strategy that calls an LLM (``llm`` / ``llm_recall``, see ``scoring/judge.py``)
the registry wires the run's judge panel in: ``accuracy`` of free-form answers becomes the
judge's verdict, and under ``llm_recall`` the ROUGE-L recall scorer is wrapped so the judge
can recover its misses. :func:`metric_names` applies EvalScope's switch of a free-form
dataset's default metrics to ``Accuracy`` under ``llm``.

The grounding metrics (``grounding``, ``completeness``, ``consistency``; README: Grounding metrics,
``scoring/grounding.py``, ``scoring/consistency.py``) are judge-driven too: they use the
grounding block's models, else the judge block's, whatever the judge strategy. They are
listed in ``metric_list`` or added to every free-form dataset by a ``judge.grounding`` block.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from groundscope.errors import ConfigError
from groundscope.scoring.base import (
    BLEU_KEYS,
    ROUGE_KEYS,
    ChoiceScorer,
    ReferenceScorer,
    Scorer,
    ScoringContext,
    exact_match,
    score_safely,
)

if TYPE_CHECKING:
    from groundscope.config import JudgeConfig
    from groundscope.scoring.judge import JudgePanel

__all__ = ["Scorer", "ScoringContext", "build_scorers", "metric_names", "primary_metric",
           "score_safely", "scorer_keys"]

log = logging.getLogger("groundscope")

RECALL_KEY = "rouge-l-r"  # EvalScope's main score of General-VQA, the one llm_recall raises
GROUNDING_METRICS = ("grounding", "completeness", "consistency")


def _warm_tokenizers() -> None:
    from groundscope.scoring.english import warm_up

    warm_up()


def _bleu(prediction: str, reference: str) -> dict[str, float]:
    from groundscope.scoring.text import bleu

    return bleu(prediction, reference)


def _rouge(prediction: str, reference: str) -> dict[str, float]:
    from groundscope.scoring.text import rouge

    return rouge(prediction, reference)


def metric_names(defaults: Sequence[str], metric_list: Sequence[str] | None,
                 judge: JudgeConfig | None) -> list[str]:
    """The metrics a dataset is scored with.

    An explicit ``metric_list`` is respected as given. Otherwise the format's defaults,
    except that with judge strategy ``llm`` a dataset whose defaults are rule metrics for
    free-form answers (BLEU, ROUGE, ...) is scored by ``accuracy`` instead, as EvalScope's
    General-VQA does (its table then shows only ``Accuracy ↑``).

    >>> from groundscope.config import JudgeConfig
    >>> llm = JudgeConfig(strategy="llm", models=[{"model_id": "j", "api_url": "mock"}])
    >>> metric_names(["BLEU", "Rouge"], None, llm), metric_names(["BLEU", "Rouge"], ["Rouge"], llm)
    (['accuracy'], ['Rouge'])
    >>> metric_names(["acc"], None, llm), metric_names(["BLEU", "Rouge"], None, None)
    (['acc'], ['BLEU', 'Rouge'])

    A ``judge.grounding`` block adds its ``metrics`` to every free-form dataset:

    >>> g = JudgeConfig(models=[{"model_id": "j", "api_url": "mock"}],
    ...                 grounding={"metrics": ["grounding"]})
    >>> metric_names(["BLEU", "Rouge"], None, g), metric_names(["acc"], None, g)
    (['BLEU', 'Rouge', 'grounding'], ['acc'])
    """
    from groundscope.compat import metric_name

    free_form = all(metric_name(d) != "accuracy" for d in defaults)
    if metric_list:
        names = list(metric_list)
    elif judge is not None and judge.strategy == "llm" and free_form:
        names = ["accuracy"]
    else:
        names = list(defaults)
    if judge is not None and judge.grounding is not None and free_form:
        have = {metric_name(n) or n for n in names}
        names += [m for m in judge.grounding.metrics if m not in have]
    return names


def primary_metric(default: str, scorers: Sequence[Scorer]) -> str:
    """The format's primary metric if a scorer produces it, else the first key produced."""
    from groundscope.scoring.groups import scorer_keys

    keys = [k for ks in scorer_keys(scorers).values() for k in ks]
    return default if default in keys or not keys else keys[0]


def build_scorers(names: Sequence[str], ctx: ScoringContext | None = None) -> list[Scorer]:
    """Scorer objects for metric names (EvalScope spellings accepted, see ``compat``)."""
    from groundscope.compat import metric_name

    panel = None
    if ctx is not None and ctx.judge is not None:  # the judge's modules only where configured
        from groundscope.scoring.judge import judge_panel

        panel = judge_panel(ctx)
    scorers: list[Scorer] = []
    for raw in names:
        name = metric_name(raw) or raw
        if name == "bleu":
            scorers.append(ReferenceScorer("bleu", BLEU_KEYS, _bleu, _warm_tokenizers))
        elif name == "rouge":
            scorers.append(ReferenceScorer("rouge", ROUGE_KEYS, _rouge, _warm_tokenizers))
        elif name == "accuracy":
            scorers.append(ChoiceScorer() if panel is None else _judged_accuracy(panel))
        elif name == "exact_match":
            scorers.append(ReferenceScorer("exact_match", ("exact_match",), exact_match))
        elif name in GROUNDING_METRICS:
            scorers.append(_grounding_scorer(name, ctx))
        else:
            raise ConfigError(f"metric_list: {name!r} is not available for this dataset yet")
    if panel is not None and panel.cfg.strategy == "llm_recall":
        scorers = _with_recall(scorers, panel)
    return scorers


def _grounding_scorer(name: str, ctx: ScoringContext | None) -> Scorer:
    from groundscope.scoring import consistency, grounding

    if ctx is None or not grounding.grounding_models(ctx.judge):
        raise ConfigError(f"metric {name!r} needs a judge model: set judge.models "
                          "(or judge.grounding.models)")
    panel = grounding.grounding_panel(ctx)
    opts = grounding.grounding_options(ctx.judge)
    if name == "grounding":
        return grounding.GroundingScorer(panel, opts)
    if name == "completeness":
        return grounding.CompletenessScorer(panel, max_elements=opts.max_elements)
    return consistency.ConsistencyScorer(panel, max_group_size=opts.max_group_size)


def scorer_keys(scorers: Sequence[Scorer]) -> dict[str, tuple[str, ...]]:
    """Metric keys by scorer name, group rows' scorer names included (``scoring/groups.py``)."""
    from groundscope.scoring.groups import scorer_keys as keys

    return keys(scorers)


def _judged_accuracy(panel: JudgePanel) -> Scorer:
    from groundscope.scoring.judged import JudgedAccuracy

    return JudgedAccuracy(panel)


def _with_recall(scorers: list[Scorer], panel: JudgePanel) -> list[Scorer]:
    from groundscope.scoring.judged import RecallScorer

    wrapped = [RecallScorer(s, RECALL_KEY, panel) if RECALL_KEY in s.keys else s for s in scorers]
    judged = any(RECALL_KEY in s.keys or s.name == "accuracy" for s in scorers)
    if not judged:
        log.warning("judge strategy llm_recall re-checks ROUGE-L recall misses, but this "
                    "dataset's metric_list has no Rouge: the judge will not be asked")
    return wrapped
