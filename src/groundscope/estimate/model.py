"""An estimate's values: each dataset's records and model requests, one row per (step,
model), the media seen and the prices in force (``estimate/__init__.py`` fills them)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from groundscope.estimate.steps import StepRow
from groundscope.estimate.tokens import MediaTally
from groundscope.pricing import Price


@dataclass
class DatasetCount:
    """One dataset's records as a run reads them, and the model requests they make."""

    dataset: str
    repeats: int
    records: int = 0
    bad_records: int = 0
    duplicate_ids: int = 0
    samples: int = 0
    problems: list[str] = field(default_factory=list)  # the first bad records, one line each

    @property
    def model_requests(self) -> int:
        return self.samples * self.repeats

    def to_json(self) -> dict[str, Any]:
        return {"dataset": self.dataset, "records": self.records, "bad_records": self.bad_records,
                "duplicate_ids": self.duplicate_ids, "samples": self.samples,
                "repeats": self.repeats, "model_requests": self.model_requests,
                "first_bad_records": self.problems}


@dataclass
class Estimate:
    """The estimate of one run: datasets, one row per (step, model), media, prices."""

    model: str
    datasets: list[DatasetCount]
    rows: list[StepRow]
    media: MediaTally
    pricing: Mapping[str, Price] = field(default_factory=dict)

    def row(self, step: str, model: str | None = None) -> StepRow:
        """The row of ``step`` (and ``model``, its display id, when several answer it)."""
        found = [r for r in self.rows if r.step == step and model in (None, r.model)]
        if len(found) != 1:
            raise KeyError(f"{len(found)} rows for step {step!r} model {model!r}")
        return found[0]

    def cost(self, row: StepRow) -> float | None:
        """The row's cost at its model's price (None: not priced)."""
        price = self.pricing.get(row.model_id)
        if price is None:
            return None
        return price.cost(row.prompt_tokens, row.completion_tokens or 0)

    def total_cost(self) -> float | None:
        """The cost of the priced rows (None when no row is priced)."""
        costs = [c for r in self.rows if (c := self.cost(r)) is not None]
        return sum(costs) if costs else None
