"""What a run asked of its models: requests and tokens per step and model, billed or not,
and what they cost.

A *step* is the evaluated model's answers (``model``) or one judge step: ``correctness``
(the verdict), ``claims``, ``verification``, ``completeness``, ``equivalence`` (the cache
purpose of ``scoring/judge.py``, ``judge`` read as ``correctness``). Each (step, model id)
has two :class:`Tokens` counts:

- ``billed``: replies requested from the provider for this run's rows;
- ``cached``: replies that cost no request: served from the judge response cache
  (``client/cache.py``), or reused from an earlier session of a resumed run (``--use-cache``:
  the saved prediction and its reviews).

``prompt_tokens`` include ``cached_tokens`` (the provider's prompt cache, priced at
``cached_input`` when given) and ``completion_tokens`` include ``reasoning_tokens``, as the
APIs count them. Failed requests carry no usage and are not counted here.

Where the numbers come from, so a run directory can rebuild them: a prediction row's
``usage`` (the model step) and a review row's ``usage`` (the judge calls made to score it,
``{step: {model: {"billed": Tokens, "cached": Tokens}}}``, written only when there were
some). A dataset's ``summary.usage`` is the sum over its current prediction and review rows;
``groundscope report`` and ``score`` count each as it was recorded (a prediction row as
billed: it was asked once; ``score`` counts the judge calls it makes now, most of them
from the response cache), so after a resume they show the run's total, where the resumed
``eval`` showed the reused rows as cached.

``summary.usage`` in the JSON report (``UsageSummary``)::

    {"steps":    {step: {model: {"billed": T, "cached": T, "cost": float | null}}},
     "by_step":  {step: {"billed": T, "cached": T, "cost": float | null}},
     "by_model": {model: {"billed": T, "cached": T, "cost": float | null}},
     "total":    {"billed": T, "cached": T, "cost": float | null},
     "unpriced": [model ids with billed tokens and no price]}

with ``T = {"requests", "prompt_tokens", "completion_tokens", "reasoning_tokens",
"cached_tokens"}``. ``cost`` is that of the billed tokens at ``pricing`` (``pricing.py``);
null where no model of the entry is priced. A sum over entries with an unpriced model
counts only the priced ones, and ``unpriced`` says which are missing: never a guess.

Judge calls are counted where they are made: the caller of a scorer opens a
:func:`metering` scope, and ``JudgePanel`` reports every reply into the innermost one
(:func:`record_call`).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, StrictInt, computed_field, model_validator

from groundscope.pricing import Price
from groundscope.types import Usage

MODEL_STEP = "model"
JudgeStep = Literal["correctness", "claims", "verification", "completeness", "equivalence"]
STEPS: tuple[str, ...] = (MODEL_STEP, *get_args(JudgeStep))
_STEP_OF_PURPOSE = {"judge": "correctness"}
MAX_COUNT = 2**53  # far above any run; keeps a hostile saved row from making a huge total

Count = Annotated[StrictInt, Field(ge=0, le=MAX_COUNT)]
StepUsage = dict[str, dict[str, Any]]  # {step: {model: {"billed": {...}, "cached": {...}}}}


def step_of(purpose: str) -> str:
    """The usage step of a judge cache purpose.

    >>> step_of("judge"), step_of("claims")
    ('correctness', 'claims')
    """
    return _STEP_OF_PURPOSE.get(purpose, purpose)


class Tokens(BaseModel):
    """Requests and their tokens."""

    model_config = ConfigDict(extra="ignore")

    requests: Count = 0
    prompt_tokens: Count = 0
    completion_tokens: Count = 0
    reasoning_tokens: Count = 0
    cached_tokens: Count = 0

    @model_validator(mode="after")
    def _held(self) -> Tokens:
        """A saved row's details within their totals, as a reply's are (``types.Usage``)."""
        self.reasoning_tokens = min(self.reasoning_tokens, self.completion_tokens)
        self.cached_tokens = min(self.cached_tokens, self.prompt_tokens)
        return self

    def add_usage(self, usage: Usage) -> None:
        """One more request with ``usage`` (each count held to ``MAX_COUNT``)."""
        self.requests = min(self.requests + 1, MAX_COUNT)
        self.prompt_tokens = min(self.prompt_tokens + max(usage.prompt_tokens, 0), MAX_COUNT)
        self.completion_tokens = min(self.completion_tokens + max(usage.completion_tokens, 0),
                                     MAX_COUNT)
        self.reasoning_tokens = min(self.reasoning_tokens + max(usage.reasoning_tokens, 0),
                                    MAX_COUNT)
        self.cached_tokens = min(self.cached_tokens + max(usage.cached_tokens, 0), MAX_COUNT)

    def add(self, other: Tokens) -> None:
        self.requests = min(self.requests + other.requests, MAX_COUNT)
        self.prompt_tokens = min(self.prompt_tokens + other.prompt_tokens, MAX_COUNT)
        self.completion_tokens = min(self.completion_tokens + other.completion_tokens, MAX_COUNT)
        self.reasoning_tokens = min(self.reasoning_tokens + other.reasoning_tokens, MAX_COUNT)
        self.cached_tokens = min(self.cached_tokens + other.cached_tokens, MAX_COUNT)

    def cost(self, price: Price) -> float:
        return price.cost(self.prompt_tokens, self.completion_tokens, self.cached_tokens)


class Entry(BaseModel):
    """The billed and cached counts of one (step, model), or of a sum of them."""

    model_config = ConfigDict(extra="ignore")

    billed: Tokens = Field(default_factory=Tokens)
    cached: Tokens = Field(default_factory=Tokens)
    cost: float | None = None

    def add(self, other: Entry) -> None:
        self.billed.add(other.billed)
        self.cached.add(other.cached)
        if other.cost is not None:
            self.cost = round((self.cost or 0.0) + other.cost, 12)


class CallCounts(BaseModel):
    """A review row's ``usage`` entry (what :meth:`Meter.to_json` writes), checked on read."""

    model_config = ConfigDict(extra="forbid")

    billed: Tokens = Field(default_factory=Tokens)
    cached: Tokens = Field(default_factory=Tokens)


RowUsage = dict[JudgeStep, dict[str, CallCounts]]  # a review row counts judge steps only


class UsageSummary(BaseModel):
    """A dataset's usage (``summary.usage``; the shape is in the module docstring)."""

    model_config = ConfigDict(extra="ignore")

    steps: dict[str, dict[str, Entry]] = Field(default_factory=dict)
    unpriced: list[str] = Field(default_factory=list)

    def entry(self, step: str, model: str) -> Entry:
        by_model = self.steps.get(step)
        if by_model is None:
            by_model = self.steps[step] = {}
        found = by_model.get(model)
        if found is None:
            found = by_model[model] = Entry()
        return found

    def add(self, step: str, model: str, usage: Usage, *, billed: bool) -> None:
        """One reply of ``model`` at ``step``."""
        entry = self.entry(step, model)
        (entry.billed if billed else entry.cached).add_usage(usage)

    def add_calls(self, calls: Mapping[str, Mapping[str, Any]], *, reused: bool = False) -> None:
        """A review's judge calls (``Score.usage``): counted as recorded, or all as cached
        when the review was ``reused`` (no call was made for it now)."""
        for step, by_model in calls.items():
            for model, counts in by_model.items():
                entry = self.entry(step, model)
                got = counts if isinstance(counts, CallCounts) else CallCounts.model_validate(counts)
                entry.cached.add(got.cached)
                (entry.cached if reused else entry.billed).add(got.billed)

    def price(self, pricing: Mapping[str, Price]) -> None:
        """Put each entry's cost (billed tokens at its model's price) and the unpriced models."""
        unpriced: set[str] = set()
        for by_model in self.steps.values():
            for model, entry in by_model.items():
                price = pricing.get(model)
                entry.cost = round(entry.billed.cost(price), 12) if price is not None else None
                if price is None and entry.billed.requests:
                    unpriced.add(model)
        self.unpriced = sorted(unpriced)

    def _sum(self, key: str) -> dict[str, Entry]:
        out: dict[str, Entry] = {}
        for step, by_model in self.steps.items():
            for model, entry in by_model.items():
                out.setdefault(step if key == "step" else model, Entry()).add(entry)
        return out

    @computed_field  # type: ignore[prop-decorator]
    @property
    def by_step(self) -> dict[str, Entry]:
        return self._sum("step")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def by_model(self) -> dict[str, Entry]:
        return self._sum("model")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def total(self) -> Entry:
        out = Entry()
        for by_model in self.steps.values():
            for entry in by_model.values():
                out.add(entry)
        return out


# ---------------------------------------------------------------- counting judge calls


class Meter:
    """The judge calls made inside one :func:`metering` scope (e.g. scoring one sample)."""

    __slots__ = ("calls",)

    def __init__(self) -> None:
        self.calls: dict[tuple[str, str], CallCounts] = {}

    def __bool__(self) -> bool:
        return bool(self.calls)

    def record(self, step: str, model: str, usage: Usage, *, cached: bool) -> None:
        counts = self.calls.get((step, model))
        if counts is None:
            counts = self.calls[(step, model)] = CallCounts()
        (counts.cached if cached else counts.billed).add_usage(usage)

    def to_json(self) -> StepUsage:
        """``{step: {model: {"billed": {...}, "cached": {...}}}}`` (a review row's ``usage``)."""
        out: StepUsage = {}
        for (step, model), counts in sorted(self.calls.items()):
            out.setdefault(step, {})[model] = counts.model_dump()
        return out


_METER: ContextVar[Meter | None] = ContextVar("groundscope_usage_meter", default=None)


@contextmanager
def metering() -> Iterator[Meter]:
    """A scope whose judge calls are counted in the yielded :class:`Meter`. Tasks started
    inside it (``asyncio.gather``) count into it too; each task's own scope is its own."""
    meter = Meter()
    token = _METER.set(meter)
    try:
        yield meter
    finally:
        _METER.reset(token)


def record_call(step: str, model: str, usage: Usage, cached: bool) -> None:
    """Count one judge reply in the current :func:`metering` scope (none: not counted)."""
    meter = _METER.get()
    if meter is not None:
        meter.record(step, model, usage, cached=cached)


# ---------------------------------------------------------------- one line


def short_count(n: int) -> str:
    """A count for a line, in the largest unit that keeps it below 1000 of it (never in
    exponent notation: a hostile reply's 2**31 tokens read ``2.15G``).

    >>> short_count(950), short_count(12345), short_count(4_560_000), short_count(999_999)
    ('950', '12.3k', '4.56M', '1M')
    >>> short_count(6_442_450_941), short_count(2**53)
    ('6.44G', '9007T')
    """
    if n < 1000:
        return str(n)
    for scale, unit in ((1e3, "k"), (1e6, "M"), (1e9, "G")):
        text = f"{n / scale:.3g}"
        if float(text) < 1000:
            return text + unit
    return f"{n / 1e12:.0f}T"


def tokens_text(t: Tokens) -> str:
    """``3 requests, 1.2k in (100 cached) / 340 out (40 reasoning)``."""
    text = f"{t.requests} request{'s' if t.requests != 1 else ''}, {short_count(t.prompt_tokens)} in"
    if t.cached_tokens:
        text += f" ({short_count(t.cached_tokens)} cached)"
    text += f" / {short_count(t.completion_tokens)} out"
    if t.reasoning_tokens:
        text += f" ({short_count(t.reasoning_tokens)} reasoning)"
    return text


def cost_text(cost: float | None, unpriced: list[str]) -> str:
    """``cost 0.0123`` (currency units of ``pricing``), with what is not priced."""
    text = "" if cost is None else f"cost {cost:.4g}"
    if unpriced:
        text += ("; " if text else "") + "no price for " + ", ".join(unpriced)
    return text


def usage_line(usage: UsageSummary) -> str | None:
    """The usage of a dataset in one line (None when no model was asked anything).

    >>> u = UsageSummary()
    >>> u.add("model", "m", Usage(1200, 300, 1500), billed=True)
    >>> u.add("correctness", "j", Usage(400, 20, 420), billed=False)
    >>> u.price({"m": Price(input=1.0, output=2.0)})
    >>> usage_line(u)
    'usage: model m 1 request, 1.2k in / 300 out; cached (not billed) 1 request, 400 in / 20 out; cost 0.0018'
    """
    total = usage.total
    if not total.billed.requests and not total.cached.requests:
        return None
    parts = [f"{step} {model} {tokens_text(entry.billed)}"
             for step, model, entry in step_rows(usage) if entry.billed.requests]
    if total.cached.requests:
        parts.append(f"cached (not billed) {tokens_text(total.cached)}")
    cost = cost_text(total.cost, usage.unpriced)
    if cost:
        parts.append(cost)
    return "usage: " + "; ".join(parts)


def step_rows(usage: UsageSummary) -> list[tuple[str, str, Entry]]:
    """``(step, model, entry)``: the model's answers first, then the judge steps in the
    order a sample meets them, models by name."""
    def rank(step: str) -> tuple[int, str]:
        return (STEPS.index(step) if step in STEPS else len(STEPS), step)

    return [(step, model, entry) for step in sorted(usage.steps, key=rank)
            for model, entry in sorted(usage.steps[step].items())]
