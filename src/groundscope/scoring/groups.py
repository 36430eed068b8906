"""Group scorers: metrics of a *group* of samples, computed once all its members are scored.

A group scorer is a scorer whose per-sample ``score()`` only records a *member* row (its
``keys`` are empty: a member row enters no average) and whose ``score_groups(members)``
turns the member rows of one subset into one ``Score`` per group, under ``group_name`` with
``group_keys`` (e.g. ``consistency``: paraphrased questions about one image).

:class:`GroupStage` is the orchestration's side: the sample path (``pipeline.record_score``,
for ``eval`` and ``groundscope score``) hands it every score as it is produced or reused,
and when the dataset is done ``finish()`` scores the groups. Group rows are saved in the
subset's reviews file like any score (sample id ``group:<id>``, request hash
:data:`GROUP_REQUEST_HASH`), so ``groundscope report`` rebuilds the group metrics from the
reviews alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from groundscope.scoring.base import Scorer
from groundscope.types import Score

GROUP_REQUEST_HASH = "group"


@runtime_checkable
class GroupScorer(Protocol):
    """A scorer with a second, per-group stage (see the module docstring)."""

    name: str
    keys: tuple[str, ...]
    group_name: str
    group_keys: tuple[str, ...]

    async def score_groups(self, members: Sequence[Score]) -> list[Score]: ...


def scorer_keys(scorers: Sequence[Scorer]) -> dict[str, tuple[str, ...]]:
    """Metric keys by scorer name, group rows' names included (for re-aggregating reviews)."""
    out = {s.name: s.keys for s in scorers}
    out.update({s.group_name: s.group_keys for s in scorers if isinstance(s, GroupScorer)})
    return out


class GroupStage:
    """Collects the member rows of a dataset's group scorers; ``finish()`` scores the groups."""

    def __init__(self, scorers: Sequence[Scorer]) -> None:
        self._scorers = {s.name: s for s in scorers if isinstance(s, GroupScorer)}
        self._members: dict[tuple[str, str], list[Score]] = {}

    def __bool__(self) -> bool:
        return bool(self._scorers)

    def collect(self, subset: str, score: Score) -> None:
        """Keep ``score`` if it is a member row of a group scorer."""
        if score.scorer in self._scorers:
            self._members.setdefault((subset, score.scorer), []).append(score)

    async def finish(self) -> list[tuple[str, Score, tuple[str, ...]]]:
        """``(subset, group score, its metric keys)`` for every group; members are released."""
        out: list[tuple[str, Score, tuple[str, ...]]] = []
        members, self._members = self._members, {}
        for (subset, name), rows in sorted(members.items()):
            scorer = self._scorers[name]
            for score in await scorer.score_groups(rows):
                out.append((subset, score, scorer.group_keys))
        return out
