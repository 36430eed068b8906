"""The live view of a running eval, one short text for the progress display (``progress.py``):

    rouge-l-r 0.734 | in flight 7/8, judges 3/8 | retries 2, 429s 0 | 12.3k in / 4.5k out | cost 0.0123

- the running primary score of the dataset being scored (the mean of its OK scores so far;
  a ratio metric's weighted mean, as the report's; not the final figure, which has CIs);
- requests in flight against the current in-flight limit, of the evaluated model's endpoint
  and of the judges' together (``GateStats``: a rate-limiting gate lowers the limit);
- transport retries and 429 answers so far, model and judges together;
- billed tokens so far (prompt / completion) and their cost at ``pricing`` (``usage.py``).

Every number is read when the text is asked for; the only per-sample work is adding the
primary value to a running sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from groundscope.types import ScoreStatus
from groundscope.usage import Tokens, cost_text, short_count

if TYPE_CHECKING:
    from groundscope.client.chat import ChatClient
    from groundscope.client.gate import Gate, GateStats
    from groundscope.pipeline import Scored
    from groundscope.plan import DatasetRun
    from groundscope.pricing import Price
    from groundscope.scoring import ScoringContext


class LiveView:
    """What the progress display shows of a run (see the module docstring)."""

    def __init__(self, runs: Sequence[DatasetRun], scoring: ScoringContext,
                 pricing: Mapping[str, Price]) -> None:
        self.runs = runs
        self.scoring = scoring
        self.pricing = pricing
        self.client: ChatClient | None = None
        self._sums: dict[str, list[float]] = {}  # dataset -> [sum of weight*value, sum of weight]
        self._current: str | None = None

    def scored(self, run: DatasetRun, scored: Scored) -> None:
        """One score of ``run``: its primary value joins the running mean."""
        score, key = scored.score, run.primary_metric
        if score.status is not ScoreStatus.OK or key not in score.values:
            return
        weight = float(score.weights.get(key, 1.0))
        sums = self._sums.get(run.name)
        if sums is None:
            sums = self._sums[run.name] = [0.0, 0.0]
        sums[0] += weight * float(score.values[key])
        sums[1] += weight
        self._current = run.name

    def _gates(self) -> tuple[list[GateStats], list[GateStats]]:
        """The counters of the model's gate and of the judges' gates, each gate once (judge
        clients of one endpoint share its gate). A Ray run has no client here: its gates are
        the driver's views of the gate actors, refreshed every second."""
        seen: set[int] = set()

        def once(gates: list[Gate]) -> list[GateStats]:
            fresh = []
            for g in gates:
                if id(g) not in seen:
                    seen.add(id(g))
                    fresh.append(g.stats)
            return fresh

        gates = self.scoring.gates  # a Ray run's: the driver's views of the shared gates
        model = once([self.client.gate] if self.client is not None else
                     [g for name, g in gates.items() if name == "model"])
        judges = once([c.gate for c in self.scoring.judge_clients] +
                      [g for name, g in gates.items() if name != "model"])
        return model, judges

    def status(self) -> str:
        parts = []
        run = next((r for r in self.runs if r.name == self._current), None)
        if run is not None and self._sums[run.name][1] > 0:
            num, den = self._sums[run.name]
            parts.append(f"{run.primary_metric} {num / den:.3f}")
        model, judges = self._gates()
        flights = []
        for name, group in (("in flight", model), ("judges", judges)):
            if group:
                flights.append(f"{name} {sum(s.in_flight for s in group)}/"
                               f"{sum(s.limit for s in group)}")
        if flights:
            parts.append(", ".join(flights))
        retries = sum(s.retries for s in (*model, *judges))
        limited = sum(s.rate_limited for s in (*model, *judges))
        parts.append(f"retries {retries}, 429s {limited}")
        billed = Tokens()
        unpriced: set[str] = set()
        cost: float | None = None
        for r in self.runs:
            usage = r.summary.usage
            usage.price(self.pricing)
            total = usage.total
            billed.add(total.billed)
            unpriced.update(usage.unpriced)
            if total.cost is not None:
                cost = (cost or 0.0) + total.cost
        parts.append(f"{short_count(billed.prompt_tokens)} in / "
                     f"{short_count(billed.completion_tokens)} out")
        priced = cost_text(cost, []) if cost is not None else ""
        if priced:
            parts.append(priced + (" (some models unpriced)" if unpriced else ""))
        return " | ".join(parts)
