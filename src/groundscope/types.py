"""Core value types shared by every stage of an evaluation.

All of them are frozen dataclasses: a stage receives values and returns new ones, nothing
is mutated in place. Pydantic lives only at the edges (``config.py`` for what comes in,
``rows.py`` / ``report/model.py`` for what goes to disk; ``rowcodec.py`` maps these types to rows).

The flow, in types::

    Origin + record --(dataset format)--> Sample
    Sample --(client)--> Completion --> Prediction --(store)
    Prediction + Sample --(scorer)--> Score --(store)
    [Score] --(metrics)--> MetricResult --> Report
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from types import MappingProxyType
from typing import Any, Literal

_EMPTY: Mapping[str, Any] = MappingProxyType({})
MAX_TOKEN_COUNT = 2**31 - 1  # the bound of every saved token count: a reply's, a row's


class Modality(StrEnum):
    """The kind of a medium."""

    IMAGE = "image"
    AUDIO = "audio"
    VIDEO = "video"


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a record came from: the file and its 1-based line (row for TSV/CSV/parquet)."""

    path: Path
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True, slots=True)
class MediaRef:
    """A medium as the dataset names it, not yet read.

    ``source`` is what the record holds: a local path, an http(s) URL, a ``data:`` URI, raw
    base64 text (audio only), or the raw bytes of a file (parquet ``{"bytes": ...}``).
    ``base_dir`` is the dataset file's directory, against which a relative path resolves
    first (then the current directory); it is always an allowed media root (``media/roots.py``).
    ``format`` is a hint such as ``wav``/``mp4``;
    ``detail`` is the OpenAI image detail level, passed through untouched;
    ``fps`` is a video's frame-sampling rate, sent beside the video part (as EvalScope does).
    """

    kind: Modality
    source: str | bytes
    format: str | None = None
    detail: str | None = None
    base_dir: Path | None = None
    fps: float | None = None


@dataclass(frozen=True, slots=True)
class TextPart:
    text: str


@dataclass(frozen=True, slots=True)
class MediaPart:
    media: MediaRef


ContentPart = TextPart | MediaPart

Role = Literal["system", "developer", "user", "assistant", "tool"]


@dataclass(frozen=True, slots=True)
class Message:
    """One chat message. ``content`` is plain text or a tuple of typed parts.

    A tool-calling transcript keeps the OpenAI keys as the record gave them: ``name`` (any
    message), ``tool_calls`` (an assistant turn: the calls, verbatim JSON objects) and
    ``tool_call_id`` (a ``tool`` message: the call it answers).
    """

    role: Role
    content: str | tuple[ContentPart, ...]
    name: str | None = None
    tool_call_id: str | None = None
    tool_calls: tuple[Mapping[str, Any], ...] = ()

    def tool_fields(self) -> dict[str, Any]:
        """The tool-calling keys that are set, in OpenAI wire form (``{}`` for most messages)."""
        out: dict[str, Any] = {}
        if self.name is not None:
            out["name"] = self.name
        if self.tool_calls:
            out["tool_calls"] = [dict(call) for call in self.tool_calls]
        if self.tool_call_id is not None:
            out["tool_call_id"] = self.tool_call_id
        return out

    def text(self) -> str:
        """The message's text, parts joined by a space (media left out)."""
        if isinstance(self.content, str):
            return self.content
        return " ".join(p.text for p in self.content if isinstance(p, TextPart))

    def media(self) -> tuple[MediaRef, ...]:
        if isinstance(self.content, str):
            return ()
        return tuple(p.media for p in self.content if isinstance(p, MediaPart))


class AnswerKind(StrEnum):
    """How a prediction is compared with the reference."""

    FREE = "free"  # free-form text: BLEU/ROUGE, judge
    CHOICE = "choice"  # one letter out of ``Sample.choices``


@dataclass(frozen=True, slots=True)
class Sample:
    """One question ready to be sent: the chat messages plus what scoring needs.

    ``id`` is stable across runs: the record's ``id``/``index`` field when present, else
    ``<file stem>:<line>``. ``target`` holds the reference answers (empty when the record has
    none; for multiple choice the correct letter). ``choices`` are the option letters of a
    multiple-choice sample, in prompt order. ``question`` is the human-readable question text
    (for judges and reports). ``metadata`` carries record fields that scorers may use
    (``category``, ``group``, ``elements``, ``human_label``, ...). ``answer`` is the record's
    own answer (its ``prediction``), read only by ``--eval-type answers``.
    """

    id: str
    dataset: str
    subset: str
    messages: tuple[Message, ...]
    origin: Origin
    target: tuple[str, ...] = ()
    answer_kind: AnswerKind = AnswerKind.FREE
    choices: tuple[str, ...] = ()
    question: str = ""
    metadata: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    answer: str | None = None

    def media(self) -> tuple[MediaRef, ...]:
        return tuple(m for msg in self.messages for m in msg.media())


@dataclass(frozen=True, slots=True)
class Usage:
    """A reply's token counts, as the API reports them (0 where it reports nothing).

    ``reasoning_tokens`` are part of ``completion_tokens`` (thinking the model did before
    answering); ``cached_tokens`` are part of ``prompt_tokens`` (served from the provider's
    prompt cache, usually billed at a lower price). Counts are held here, whoever builds
    them (a reply, a saved row, a cache line): none below 0 or above ``MAX_TOKEN_COUNT``
    (a sum of a reply's counts saturates there, so what is written is always read back),
    each detail within its total.

    >>> Usage(10, 5, 15, reasoning_tokens=9, cached_tokens=40)
    Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, reasoning_tokens=5, cached_tokens=10)
    >>> Usage(3 * MAX_TOKEN_COUNT, 1).prompt_tokens == MAX_TOKEN_COUNT
    True
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    reasoning_tokens: int = 0
    cached_tokens: int = 0

    def __post_init__(self) -> None:
        if (0 <= self.reasoning_tokens <= self.completion_tokens <= MAX_TOKEN_COUNT
                and 0 <= self.cached_tokens <= self.prompt_tokens <= MAX_TOKEN_COUNT
                and 0 <= self.total_tokens <= MAX_TOKEN_COUNT):
            return  # already held: the usual case, on the per-sample path
        prompt, completion = _held(self.prompt_tokens), _held(self.completion_tokens)
        held = {"prompt_tokens": prompt, "completion_tokens": completion,
                "total_tokens": _held(self.total_tokens),
                "reasoning_tokens": min(max(self.reasoning_tokens, 0), completion),
                "cached_tokens": min(max(self.cached_tokens, 0), prompt)}
        for name, value in held.items():
            if getattr(self, name) != value:
                object.__setattr__(self, name, value)


def _held(count: int) -> int:
    return min(max(count, 0), MAX_TOKEN_COUNT)


@dataclass(frozen=True, slots=True)
class Completion:
    """What the model answered."""

    text: str
    model: str = ""
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    reasoning: str | None = None


class PredictionStatus(StrEnum):
    OK = "ok"
    ERROR = "error"  # the request failed for good (after retries)


@dataclass(frozen=True, slots=True)
class Prediction:
    """The outcome of asking the model one sample: persisted before any scoring.

    ``request_hash`` fingerprints the request content (messages with media identities,
    model, generation config), so a resumed run re-uses a prediction only if it would have
    sent the very same request.
    """

    sample_id: str
    request_hash: str
    status: PredictionStatus
    completion: Completion | None = None
    error: str | None = None
    error_kind: str | None = None  # e.g. "http_400", "timeout", "context_length"
    attempts: int = 1
    latency_s: float = 0.0
    repeat: int = 0

    @property
    def text(self) -> str:
        """The answer's text; ``""`` when the request failed (no completion)."""
        return self.completion.text if self.completion else ""


class ScoreStatus(StrEnum):
    """Whether a score can enter an average. Only ``OK`` scores are aggregated."""

    OK = "ok"
    NO_ANSWER = "no_answer"  # no reference to compare with, or no checkable claims
    JUDGE_FAILED = "judge_failed"  # the judge broke its contract after bounded retries
    ERROR = "error"  # the prediction errored, or the scorer raised


@dataclass(frozen=True, slots=True)
class Score:
    """One scorer's verdict on one prediction.

    ``values`` maps canonical metric keys (``bleu-1``, ``rouge-l-r``, ``accuracy`` ...) to
    numbers in [0, 1]. ``extracted`` is what the scorer read from the prediction (e.g. the
    chosen letter). ``detail`` holds explanations (judge reasoning, per-claim verdicts).
    ``weights`` makes a value part of a *ratio* (micro) metric: the value is ``part / whole``
    of this sample and its weight is ``whole`` (e.g. its number of claims), so the aggregate
    is ``sum(weight * value) / sum(weight)``; keys without a weight count once per sample.
    ``usage`` holds the judge calls made to reach it, ``{step: {model: {"billed": counts,
    "cached": counts}}}`` (``groundscope.usage``); empty when no judge was asked.
    """

    sample_id: str
    scorer: str
    status: ScoreStatus
    values: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    extracted: str | None = None
    detail: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)
    repeat: int = 0
    weights: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    usage: Mapping[str, Any] = field(default_factory=lambda: _EMPTY)


@dataclass(frozen=True, slots=True)
class MetricResult:
    """An aggregate of one metric over one subset (or ``OVERALL``)."""

    metric: str
    subset: str
    num: int
    score: float
    ci_low: float | None = None
    ci_high: float | None = None
    excluded: int = 0  # samples whose score was not OK and so not averaged
