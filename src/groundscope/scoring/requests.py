"""What a judge-driven scorer declares it may send, before any request (``--dry-run``).

A scorer that calls judges says so itself, beside the code that makes the calls:
:meth:`RequestBounded.request_steps` names the steps it takes (with their models and repair
turns) and :meth:`RequestBounded.request_bounds` bounds one sample's requests per repeat;
a scorer that scores groups once a dataset is read (consistency) also implements
:class:`GroupBounded`. ``estimate/steps.py`` only sums what is declared, with one rule: a
bound declared twice for one sample (equal in every field, e.g. ``JudgedAccuracy`` and
``RecallScorer`` asking the panel one question) is one set of requests, as the judge's cache
answers the second. Rule scorers make no request and declare nothing.

Bounds are first attempts; a reply that breaks its contract gets up to the step's
``repairs`` repair turns, which the estimate shows as requests x (1 + repairs).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from groundscope.types import Message, Sample

if TYPE_CHECKING:
    from groundscope.config import JudgeModel


@dataclass(frozen=True, slots=True)
class JudgeStep:
    """A step a scorer takes (a ``usage.STEPS`` name) with the models it asks, in order, and
    the repair turns a broken reply gets."""

    step: str
    models: Sequence[JudgeModel]
    repairs: int


@dataclass(frozen=True, slots=True)
class RequestBound:
    """At most ``requests`` requests per repeat to model ``model`` (an index into the step's
    models), each of about ``tokens_each`` prompt tokens; ``fallback``: requests made only
    after a batch broke its contract after its repairs (``verify: batch``)."""

    step: str
    model: int
    requests: int
    tokens_each: int
    fallback: int = 0


class TokenEstimate(Protocol):
    """The token rules a scorer's bounds are counted with (``estimate/tokens.py``)."""

    @property
    def answer(self) -> int:
        """Tokens of one answer a judge prompt quotes (the model's completion cap)."""
        ...

    def prompt(self, messages: Sequence[Message]) -> int:
        """Prompt tokens of one request of ``messages``."""
        ...

    def chars(self, n: int) -> int:
        """Tokens of a text of ``n`` characters."""
        ...


@runtime_checkable
class RequestBounded(Protocol):
    """A scorer that asks judges and declares how much it may ask."""

    def request_steps(self) -> Sequence[JudgeStep]:
        """The steps this scorer may take (each gets its rows in an estimate, if only 0)."""
        ...

    def request_bounds(self, sample: Sample, tokens: TokenEstimate) -> Sequence[RequestBound]:
        """The most requests scoring one answer to ``sample`` may make, per repeat."""
        ...


@runtime_checkable
class GroupBounded(Protocol):
    """A scorer that also asks judges once per group of samples, when a dataset is read."""

    def group_member(self, sample: Sample) -> tuple[str, Any] | None:
        """``(group id, what the bound needs of this member)``, None outside any group."""
        ...

    def group_bounds(self, members: Sequence[Any], tokens: TokenEstimate
                     ) -> Sequence[RequestBound]:
        """The most requests one group of ``members`` (one subset's) may make, per repeat."""
        ...
