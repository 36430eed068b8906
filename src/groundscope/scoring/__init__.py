"""Scorers: the registry that turns ``metric_list`` names into scorer objects."""

from __future__ import annotations

from collections.abc import Sequence

from groundscope.errors import ConfigError
from groundscope.scoring.base import (
    BLEU_KEYS,
    ROUGE_KEYS,
    ChoiceScorer,
    ReferenceScorer,
    Scorer,
    ScoringContext,
    exact_match,
)

__all__ = ["Scorer", "ScoringContext", "build_scorers"]


def _bleu(prediction: str, reference: str) -> dict[str, float]:
    from groundscope.scoring.text import bleu

    return bleu(prediction, reference)


def _rouge(prediction: str, reference: str) -> dict[str, float]:
    from groundscope.scoring.text import rouge

    return rouge(prediction, reference)


def build_scorers(names: Sequence[str], ctx: ScoringContext | None = None) -> list[Scorer]:
    """Scorer objects for metric names (EvalScope spellings accepted, see ``compat``)."""
    from groundscope.compat import metric_name

    scorers: list[Scorer] = []
    for raw in names:
        name = metric_name(raw) or raw
        if name == "bleu":
            scorers.append(ReferenceScorer("bleu", BLEU_KEYS, _bleu))
        elif name == "rouge":
            scorers.append(ReferenceScorer("rouge", ROUGE_KEYS, _rouge))
        elif name == "accuracy":
            scorers.append(ChoiceScorer())
        elif name == "exact_match":
            scorers.append(ReferenceScorer("exact_match", ("exact_match",), exact_match))
        else:
            raise ConfigError(f"metric_list: {name!r} is not available for this dataset yet")
    return scorers
