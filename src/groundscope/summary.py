"""The execution summary of one dataset in a run: what was asked, what came back, what was
skipped. The runner's plan counts into it; the JSON report (``report/model.py``) carries it."""

from __future__ import annotations

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

    def count(self, ok: bool, error_kind: str | None = None) -> None:
        """One finished request: succeeded, or errored (``error_kind``, else ``error``)."""
        self.requested += 1
        if ok:
            self.succeeded += 1
            return
        self.errored += 1
        kind = error_kind or "error"
        self.errors_by_kind[kind] = self.errors_by_kind.get(kind, 0) + 1
