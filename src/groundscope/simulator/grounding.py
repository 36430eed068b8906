"""The simulator's grounding mode: the grounding judge steps answered from a ground-truth file,
and the evaluated model's planted answers.

The ground-truth file (JSON; ``simulator.truth``) describes images with known contents and
the answers a simulated model gives about them::

    {"images": {"dog": "../media/dog.jpg"},            # name -> path (relative to this file)
     "facts": {"dog": {"supported": ["The dog is brown."],
                       "contradicted": ["A red ball lies next to the dog."]}},
     "answers": [{"image": "dog", "question": "Describe the picture.",
                  "answer": "A brown dog ... A red ball lies next to the dog.",
                  "claims": ["The dog is brown.", "A red ball lies next to the dog."],
                  "covers": ["a dog"]}],
     "equivalent": [["2", "Two wheels."]],             # answers that mean the same
     "unparseable": ["..."]}                            # answers whose extraction is garbage

:class:`GroundingResponder` recognises the four grounding prompts by their markers
(``scoring/grounding_prompt.py``) and answers deterministically:

- claims: the listed ``claims`` of (question, answer), else of the answer alone, else one
  claim per sentence of the answer; an ``unparseable`` answer always gets garbage;
- verification: ``contradicted`` if a request image's facts contradict the claim (compared
  case-insensitively), else ``supported`` if they support it, else ``not_determinable``;
- batch verification: the same verdict for each numbered claim, as the ordered list its
  contract asks for;
- completeness: the expected elements listed in the answer's ``covers`` (verbatim), else
  those whose every word occurs in the answer;
- equivalence: true when both answers normalise alike (``scoring/normalise.py``) or fall in
  one ``equivalent`` class (compared normalised).

``malformed_tries`` makes the first N tries of every request garbage (a retry carries N
earlier assistant turns), to exercise repairs. ``verify_noise`` changes that share of
verification verdicts to another verdict, deterministically per (``seed``, judge model, claim,
images, the request's vote ``seed``): a claim gets the same verdict in both verification
modes, and votes of one claim may differ. ``batch_fault`` breaks batch replies on their first
``batch_fault_tries`` tries (None: every try): ``count`` drops the last verdict, ``order``
rotates the entries (claim numbers out of order), ``verdict`` gives the first one an
unknown verdict. ``calls`` counts requests per step (by marker).

:class:`ScriptedAnswers` plays the evaluated model: a request whose last user text and media
match an ``answers`` entry gets its ``answer``; anything else falls through to the oracle.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson

from groundscope.errors import ConfigError, GroundscopeError
from groundscope.scoring.grounding_prompt import (
    CHECK_VERDICTS,
    CLAIMS_MARKER,
    COMPLETENESS_MARKER,
    EQUIVALENCE_MARKER,
    MARKERS,
    VERIFY_BATCH_MARKER,
    VERIFY_MARKER,
    batch_claims,
    quoted,
)
from groundscope.scoring.judge_prompt import JUDGE_MARKER
from groundscope.scoring.normalise import normalise_answer
from groundscope.simulator.judge import JudgeResponder, unit_hash
from groundscope.simulator.wire import Responder, SimReply, SimRequest

if TYPE_CHECKING:
    from groundscope.config import SimulatorArgs

_GARBAGE = ("Let me look at the image first.", '{"claims": "a dog"}', '{"verdict": "maybe"}')
_REASONS = {"supported": "The image shows this.",
            "contradicted": "The image shows otherwise.",
            "not_determinable": "The image does not show enough to tell."}
BatchFault = Literal["count", "order", "verdict"]
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_WORD = re.compile(r"\w+")


@dataclass
class GroundTruth:
    """What the simulator knows about the images and the planted answers (see the module)."""

    scripted: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)
    claims: dict[tuple[str, str], list[str]] = field(default_factory=dict)
    claims_by_answer: dict[str, list[str] | None] = field(default_factory=dict)
    facts: dict[tuple[str, str], str] = field(default_factory=dict)
    covers: dict[str, list[str]] = field(default_factory=dict)
    classes: list[frozenset[str]] = field(default_factory=list)
    unparseable: frozenset[str] = frozenset()

    @classmethod
    def load(cls, path: str | Path) -> GroundTruth:
        """Read a ground-truth file; a malformed one is a ``ConfigError`` naming the field."""
        path = Path(path)
        try:
            data = orjson.loads(path.read_bytes())
            return cls._build(data, path)
        except OSError as exc:
            raise ConfigError(f"simulator.truth: cannot read {path}: {exc.strerror}") from None
        except orjson.JSONDecodeError as exc:
            raise ConfigError(f"simulator.truth: {path}: not valid JSON ({exc})") from None
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"simulator.truth: {path}: malformed ({exc!r})") from None

    @classmethod
    def _build(cls, data: Mapping[str, Any], path: Path) -> GroundTruth:
        ids = {name: _image_id(path.parent, src) for name, src in data.get("images", {}).items()}
        truth = cls(unparseable=frozenset(data.get("unparseable", ())))
        for name, facts in data.get("facts", {}).items():
            for verdict in ("supported", "contradicted"):
                for claim in facts.get(verdict, ()):
                    truth.facts[(ids[name], normalise_answer(claim))] = verdict
        for entry in data.get("answers", ()):
            answer, question = entry["answer"], entry["question"].strip()
            truth.scripted[(question, (ids[entry["image"]],))] = answer
            if "claims" in entry:
                claims = list(entry["claims"])
                truth.claims[(question, answer)] = claims
                seen = truth.claims_by_answer.get(answer, claims)
                truth.claims_by_answer[answer] = claims if seen == claims else None
            if "covers" in entry:
                truth.covers[answer] = list(entry["covers"])
        truth.classes = [frozenset(normalise_answer(a) for a in group)
                         for group in data.get("equivalent", ())]
        return truth

    def extract(self, question: str, answer: str) -> list[str]:
        known = self.claims.get((question.strip(), answer)) or self.claims_by_answer.get(answer)
        if known is not None:
            return known
        return [s for s in _SENTENCE.split(answer.strip()) if s]

    def verdict(self, claim: str, media_ids: Sequence[str]) -> str:
        found = {self.facts.get((mid, normalise_answer(claim))) for mid in media_ids}
        for verdict in ("contradicted", "supported"):
            if verdict in found:
                return verdict
        return "not_determinable"

    def covered(self, answer: str, elements: Sequence[str]) -> list[str]:
        if answer in self.covers:
            listed = set(self.covers[answer])
            return [e for e in elements if e in listed]
        words = set(_WORD.findall(answer.casefold()))
        return [e for e in elements if set(_WORD.findall(e.casefold())) <= words]

    def equivalent(self, a: str, b: str) -> bool:
        na, nb = normalise_answer(a), normalise_answer(b)
        return na == nb or any(na in c and nb in c for c in self.classes)


def _image_id(base: Path, source: str) -> str:
    from groundscope.simulator.oracle import sample_media_id
    from groundscope.types import MediaRef, Modality

    try:
        return sample_media_id(MediaRef(Modality.IMAGE, source, base_dir=base))
    except GroundscopeError as exc:
        raise ValueError(f"images: {source}: {exc}") from None


def _user_texts(messages: Any) -> list[str]:
    """The text of each user message of a wire request (text parts joined by a space)."""
    out = []
    for msg in messages if isinstance(messages, list) else ():
        if not isinstance(msg, Mapping) or msg.get("role") != "user":
            continue
        content = msg.get("content")
        if isinstance(content, str):
            out.append(content)
        elif isinstance(content, list):
            texts = (p.get("text", "").strip() for p in content
                     if isinstance(p, Mapping) and p.get("type") == "text")
            out.append(" ".join(t for t in texts if t))
    return out


class GroundingResponder:
    """A ``Responder`` for the four grounding judge steps (see the module docstring)."""

    def __init__(self, truth: GroundTruth | None = None, *, malformed_tries: int = 0,
                 verify_noise: float = 0.0, seed: int = 0, batch_fault: BatchFault | None = None,
                 batch_fault_tries: int | None = None) -> None:
        if not 0.0 <= verify_noise <= 1.0:
            raise ValueError("verify_noise must be in [0, 1]")
        self.truth = truth or GroundTruth()
        self.malformed_tries = malformed_tries
        self.verify_noise, self.seed = verify_noise, seed
        self.batch_fault, self.batch_fault_tries = batch_fault, batch_fault_tries
        self.calls: Counter[str] = Counter()
        self._lock = threading.Lock()

    def __call__(self, req: SimRequest) -> SimReply | None:
        messages = req.body.get("messages")
        users = _user_texts(messages)
        prompt = users[0] if users else ""
        step = next((m for m in MARKERS if prompt.startswith(m)), None)
        if step is None:
            return None
        with self._lock:
            self.calls[step] += 1
        tries = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
        if tries < self.malformed_tries:
            return SimReply(_GARBAGE[tries % len(_GARBAGE)])
        if step == VERIFY_MARKER:
            (claim,) = quoted(prompt, "claim")
            verdict = self._verdict(claim, req)
            return SimReply(_dump({"verdict": verdict, "reason": _REASONS[verdict]}))
        if step == VERIFY_BATCH_MARKER:
            return SimReply(self._batch(batch_claims(prompt), req, tries))
        return SimReply(self._answer(step, prompt))

    def _verdict(self, claim: str, req: SimRequest) -> str:
        verdict = self.truth.verdict(claim, req.media_ids)
        if not self.verify_noise:
            return verdict
        key = (self.seed, req.body.get("model"), normalise_answer(claim), req.media_ids,
               req.body.get("seed"))
        if unit_hash(*key, "noise") >= self.verify_noise:
            return verdict
        others = [v for v in CHECK_VERDICTS if v != verdict]
        return others[int(unit_hash(*key, "which") * len(others))]

    def _batch(self, claims: Sequence[str], req: SimRequest, tries: int) -> str:
        entries: list[dict[str, Any]] = []
        for k, claim in enumerate(claims, 1):
            verdict = self._verdict(claim, req)
            entries.append({"claim": k, "verdict": verdict, "reason": _REASONS[verdict]})
        fault = self.batch_fault
        if fault is not None and (self.batch_fault_tries is None or tries < self.batch_fault_tries):
            if fault == "count":
                entries = entries[:-1]
            elif fault == "order" and len(entries) > 1:
                entries = entries[1:] + entries[:1]
            elif fault == "order":
                entries[0]["claim"] = 2
            else:
                entries[0]["verdict"] = "partly"
        return _dump({"verdicts": entries})

    def _answer(self, step: str, prompt: str) -> str:
        t = self.truth
        if step == CLAIMS_MARKER:
            (question,), (answer,) = quoted(prompt, "question"), quoted(prompt, "answer")
            if answer in t.unparseable:
                return _GARBAGE[0]
            return _dump({"claims": t.extract(question, answer)})
        if step == COMPLETENESS_MARKER:
            (answer,) = quoted(prompt, "answer")
            return _dump({"covered": t.covered(answer, quoted(prompt, "element"))})
        assert step == EQUIVALENCE_MARKER
        (first,), (second,) = quoted(prompt, "answer_1"), quoted(prompt, "answer_2")
        same = t.equivalent(first, second)
        reason = "Both give the same answer." if same else "The answers differ in meaning."
        return _dump({"equivalent": same, "reason": reason})


def _dump(obj: Any) -> str:
    return orjson.dumps(obj).decode()


class ScriptedAnswers:
    """The evaluated model's planted answers: ``(question, media) -> answer`` from the truth."""

    def __init__(self, truth: GroundTruth) -> None:
        self.truth = truth

    def __call__(self, req: SimRequest) -> SimReply | None:
        if not self.truth.scripted:  # nothing planted: the oracle answers
            return None
        users = _user_texts(req.body.get("messages"))
        if not users or users[0].startswith((*MARKERS, JUDGE_MARKER)):
            return None
        answer = self.truth.scripted.get((users[-1].strip(), tuple(req.media_ids)))
        return None if answer is None else SimReply(answer)


def sim_responders(args: SimulatorArgs | None) -> list[Responder]:
    """The simulator's responders before its oracle: the correctness judge, the grounding
    steps and, with a ground-truth file (``args.truth``), the planted answers."""
    truth = GroundTruth.load(args.truth) if args is not None and args.truth else GroundTruth()
    judge = JudgeResponder(noise=args.judge_noise, seed=args.seed) if args else JudgeResponder()
    return [judge, GroundingResponder(truth), ScriptedAnswers(truth)]
