"""The execution summary of one dataset in a run: what was asked, what came back, what was
skipped. The runner's plan counts into it; the JSON report (``report/model.py``) carries it."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["Summary"]


class Summary(BaseModel):
    """The execution summary: what was asked, what came back, what was skipped."""

    model_config = ConfigDict(extra="ignore")

    requested: int = 0
    succeeded: int = 0
    errored: int = 0
    skipped: int = 0
    cached: int = 0
    changed: int = 0
    errors_by_kind: dict[str, int] = Field(default_factory=dict)
    unscored: dict[str, int] = Field(default_factory=dict)  # subset -> predictions without a score
    warnings: list[str] = Field(default_factory=list)  # one line each, shown with the table
    # per endpoint (model, judge:<id>), over the run: rate_limited (429s), retries,
    # lowest_limit (in-flight), paused_s (client/gate.py GateStats.to_json)
    rate_limits: dict[str, dict[str, int | float]] = Field(default_factory=dict)

    def why_nothing(self, skipped_file: Path) -> str | None:
        """Why no sample was answered (every record bad, every request failed, no record),
        or None when one was.

        >>> Summary(skipped=3).why_nothing(Path("run/skipped.jsonl"))
        'all 3 records were bad, see run/skipped.jsonl'
        """
        if self.succeeded:
            return None
        if self.skipped and not self.requested:
            return f"all {self.skipped} records were bad, see {skipped_file}"
        if self.requested and not self.skipped:
            return f"all {self.requested} requests failed (the predictions files say why)"
        if self.requested:
            return (f"{self.skipped} records were bad (see {skipped_file}) and the "
                    f"{self.requested} requests failed")
        return "the dataset has no records"

    def count(self, ok: bool, error_kind: str | None = None) -> None:
        """One finished request: succeeded, or errored (``error_kind``, else ``error``)."""
        self.requested += 1
        if ok:
            self.succeeded += 1
            return
        self.errored += 1
        kind = error_kind or "error"
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
