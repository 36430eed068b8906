"""The simulator's noisy oracle: deterministic behaviour knobs and answers from references.

Every decision is a hash of ``(seed, key, attempt)``, where ``key`` identifies a request's
content (:func:`oracle_key`: its texts in order, then its media ids) and ``attempt`` counts
how often that key was asked, so retries eventually succeed and a run is reproducible.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import orjson

from groundscope import media
from groundscope.errors import MediaError
from groundscope.simulator.faults import MALFORMED_BODIES
from groundscope.simulator.gateway import GATEWAY_STYLES
from groundscope.simulator.wire import Behaviour, Responder, SimReply, SimRequest, bytes_id
from groundscope.types import AnswerKind, MediaRef, Sample, TextPart

GENERIC_ANSWER = "The image shows an ordinary everyday scene."
DISTRACTOR = "I cannot tell what this shows."


def _unit(seed: int, *parts: object) -> float:
    """A deterministic number in [0, 1) from the seed and the parts."""
    raw = "\x1f".join([str(seed), *map(str, parts)]).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") / 2.0**64


def oracle_key(texts: Sequence[str], media_ids: Sequence[str]) -> str:
    """The identity of a request's content: all texts in order, then all media ids."""
    return hashlib.sha256(orjson.dumps([list(texts), list(media_ids)])).hexdigest()[:32]


def sample_media_id(ref: MediaRef) -> str:
    """The media id the server will compute for ``ref`` (an http(s) URL stands for itself)."""
    if media.is_remote(ref):
        return str(ref.source)
    return bytes_id(media.load(ref)[0])


@dataclass(frozen=True, slots=True)
class SimBehaviour:
    """How the simulated model behaves. Rates are probabilities per request (sum <= 1).

    ``max_faults_per_key`` caps the injected failures per request key: with
    ``rate_500=1.0, max_faults_per_key=2`` every request succeeds on its third attempt.
    ``max_context_tokens`` makes prompts that are too long fail with a 400
    ``context_length_exceeded`` error, like a real endpoint. The hostile knobs
    (``malformed_body``, ``reply_bytes``, ``reply_gzip``, ``reply_chunked``,
    ``declared_length``, ``header_bytes``, ``redirect_to``, ``echo_key``, ``usage_count``) are
    described in ``faults.py``; a provider's limits (``rpm``, ``tpm``, ``max_in_flight``) in
    ``limits.py``; how a gateway passes their headers on (``gateway``) and the served
    ``models`` in ``gateway.py``.
    """

    accuracy: float = 1.0
    latency_ms: float = 0.0
    jitter_ms: float = 0.0
    seed: int = 0
    rate_429: float = 0.0
    retry_after_s: float = 1.0
    rate_500: float = 0.0
    rate_timeout: float = 0.0
    hang_s: float = 30.0
    rate_malformed: float = 0.0
    rate_disconnect: float = 0.0
    max_faults_per_key: int | None = None
    max_context_tokens: int | None = None
    malformed_body: str = "truncated"
    reply_bytes: int = 0
    reply_gzip: bool = False
    reply_chunked: bool = False
    declared_length: int | None = None
    header_bytes: int = 0
    redirect_to: str | None = None
    echo_key: Literal["error", "reply"] | None = None
    rpm: int | None = None
    tpm: int | None = None
    max_in_flight: int | None = None
    usage_count: int | None = None
    gateway: str = "openai"
    models: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        for name in ("rpm", "tpm", "max_in_flight"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ValueError(f"{name} must be a positive integer")
        rates = self._rates()
        if not 0.0 <= self.accuracy <= 1.0 or any(r < 0 for _, r in rates):
            raise ValueError("accuracy and failure rates must be in [0, 1]")
        if sum(r for _, r in rates) > 1.0 + 1e-9:
            raise ValueError("failure rates must sum to at most 1")
        if self.malformed_body != "each" and self.malformed_body not in MALFORMED_BODIES:
            raise ValueError(f"malformed_body must be 'each' or one of {', '.join(MALFORMED_BODIES)}")
        if self.echo_key not in (None, "error", "reply"):
            raise ValueError("echo_key must be 'error' or 'reply'")
        if self.gateway not in GATEWAY_STYLES:
            raise ValueError(f"gateway must be one of {', '.join(GATEWAY_STYLES)}")

    @property
    def streams_reply(self) -> bool:
        """Whether answers are streamed by ``faults.stream_reply``."""
        return self.reply_bytes > 0 or self.reply_gzip or self.reply_chunked

    def _rates(self) -> tuple[tuple[str, float], ...]:
        return (
            ("429", self.rate_429), ("500", self.rate_500), ("timeout", self.rate_timeout),
            ("malformed", self.rate_malformed), ("disconnect", self.rate_disconnect),
        )

    def fault(self, key: str, attempt: int) -> str | None:
        """The failure injected into attempt ``attempt`` (1-based) of ``key``, if any."""
        if self.max_faults_per_key is not None and attempt > self.max_faults_per_key:
            return None
        u = _unit(self.seed, key, attempt, "fault")
        for name, rate in self._rates():
            if u < rate:
                return name
            u -= rate
        return None

    def correct(self, key: str) -> bool:
        """Whether the oracle answers ``key`` correctly (fixed per seed and key)."""
        return _unit(self.seed, key, "correct") < self.accuracy

    def latency_s(self, key: str, attempt: int) -> float:
        jitter = self.jitter_ms * _unit(self.seed, key, attempt, "latency")
        return (self.latency_ms + jitter) / 1000.0


@dataclass(frozen=True, slots=True)
class OracleEntry:
    key: str
    references: tuple[str, ...]
    answer_kind: AnswerKind
    choices: tuple[str, ...]


def _sample_texts(sample: Sample) -> list[str]:
    texts: list[str] = []
    for msg in sample.messages:
        if isinstance(msg.content, str):
            texts.append(msg.content)
        else:
            texts.extend(p.text for p in msg.content if isinstance(p, TextPart))
    return texts


class Oracle:
    """Answers from references: request key -> (references, answer kind, choices)."""

    def __init__(self, entries: Iterable[tuple[OracleEntry, str]] = ()) -> None:
        """``entries`` are ``(entry, text_key)`` pairs; prefer :meth:`from_samples`."""
        self._by_key: dict[str, OracleEntry] = {}
        self._by_text: dict[str, OracleEntry | None] = {}
        pool: dict[str, None] = {}
        for entry, text_key in entries:
            self._by_key.setdefault(entry.key, entry)
            seen = self._by_text.get(text_key, entry)
            self._by_text[text_key] = entry if seen is not None and seen.key == entry.key else None
            if entry.answer_kind is AnswerKind.FREE and entry.references:
                pool.setdefault(entry.references[0], None)
        self._pool = tuple(pool)

    @classmethod
    def from_samples(cls, samples: Iterable[Sample]) -> Oracle:
        """Index samples by the key their wire request will have (media read via media.py)."""
        pairs = []
        for sample in samples:
            texts = _sample_texts(sample)
            text_key = oracle_key(texts, ())
            try:
                key = oracle_key(texts, [sample_media_id(r) for r in sample.media()])
            except MediaError:
                key = text_key
            entry = OracleEntry(key, sample.target, sample.answer_kind, sample.choices)
            pairs.append((entry, text_key))
        return cls(pairs)

    def __len__(self) -> int:
        return len(self._by_key)

    def lookup(self, key: str, text_key: str) -> OracleEntry | None:
        """The entry for a request: by full key, else by text alone when that is unique."""
        return self._by_key.get(key) or self._by_text.get(text_key)

    def answer(self, entry: OracleEntry | None, behaviour: Behaviour) -> str:
        """The oracle's reply: right with probability ``accuracy``, else a wrong one."""
        if entry is None or not entry.references:
            return GENERIC_ANSWER
        correct = behaviour.correct(entry.key)
        if entry.answer_kind is AnswerKind.CHOICE:
            return self._choice_answer(entry, correct, behaviour.seed)
        right = entry.references[0]
        if correct:
            return right
        pool = self._pool  # another sample's reference, picked without scanning the pool
        start = int(_unit(behaviour.seed, entry.key, "wrong") * len(pool)) if pool else 0
        for step in range(len(pool)):
            candidate = pool[(start + step) % len(pool)]
            if candidate != right:
                return candidate
        return DISTRACTOR

    @staticmethod
    def _choice_answer(entry: OracleEntry, correct: bool, seed: int) -> str:
        right = entry.references[0]
        letter: str | None = right
        if not correct:
            others = [c for c in entry.choices if c != right]
            letter = others[int(_unit(seed, entry.key, "wrong") * len(others))] if others else None
        if letter is None:
            return "None of the options seems to fit the question."
        return f"Weighing each option against the question, option {letter} fits best.\n" \
               f"ANSWER: {letter}"


def oracle_responder(oracle: Oracle) -> Responder:
    """The fallback responder: the noisy oracle (always answers)."""

    def respond(req: SimRequest) -> SimReply:
        return SimReply(oracle.answer(oracle.lookup(req.key, req.text_key), req.behaviour))

    return respond
