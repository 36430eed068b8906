"""The simulator's judge mode: a responder that answers correctness-judge requests.

It recognises a judge request by the marker on the first line of its first user message
(``scoring/judge_prompt.py``), reads the quoted question, references and prediction back out
of it, and decides deterministically: *correct* when the normalised prediction equals a
normalised reference or contains it as a whole-word run (``"It is a dog."`` vs ``"Dog"``),
normalised as the scorers normalise answers (``scoring/normalise.py``).
Knobs, all deterministic per (seed, judge model, prompt); the prompt they hash is the
request in its ``correctness-v1`` form (:func:`v1_text`: texts verbatim, no quoting note),
so a simulated judge errs on the same samples as before prompts quoted their texts:

- ``noise``: the share of verdicts flipped (a different judge model flips different ones,
  so several simulated judges disagree like real ones);
- ``malformed``: the share of judgements answered with garbage on every try;
  ``malformed_tries``: the first N tries of every judgement are garbage (a retry is a
  request with N earlier assistant turns), so ``malformed_tries=1`` exercises one repair;
- ``think``: wrap replies in a ``<think>`` block like a reasoning model.

``calls`` counts the judge requests answered (tests assert that a cached rerun makes none);
other requests fall through to the next responder.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from groundscope.scoring.judge_prompt import JUDGE_MARKER, split_prompt
from groundscope.scoring.normalise import normalise_answer
from groundscope.scoring.quoting import QUOTING_NOTE, unescape
from groundscope.simulator.wire import SimReply, SimRequest

_GARBAGE = (
    "The predicted answer looks right to me.",  # prose, no JSON
    '{"reasoning": "close enough", "verdict": "C"}',  # a label outside A/B
    '{"reasoning": "it matches", "verdict": "A"',  # unterminated object
)
_V1_MARKER = "[groundscope-judge/correctness-v1]"


def v1_text(prompt: str) -> str:
    """A judge prompt as ``correctness-v1`` wrote it: the v1 marker, no quoting note, the
    quoted texts verbatim (outside the blocks a prompt holds no entity, so one unescape of
    the whole text is exact)."""
    prompt = prompt.replace(JUDGE_MARKER, _V1_MARKER, 1).replace("\n" + QUOTING_NOTE, "", 1)
    return unescape(prompt)


def unit_hash(*parts: object) -> float:
    """A number in [0, 1) fixed by ``parts`` (the simulator's deterministic dice)."""
    raw = "\x1f".join(map(str, parts)).encode()
    return int.from_bytes(hashlib.blake2b(raw, digest_size=8).digest(), "big") / 2.0**64


def matches(prediction: str, references: Sequence[str]) -> bool:
    """Whether the prediction equals or contains (as a whole-word run) some reference.

    >>> matches("It is a dog.", ["Dog"]), matches("A museum", ["Dog", "museum"])
    (True, True)
    >>> matches("hotdog", ["dog"]), matches("", ["dog"])
    (False, False)
    """
    pred = f" {normalise_answer(prediction)} "  # words hold no space: a run is a substring
    for ref in references:
        want = normalise_answer(ref)
        if want and f" {want} " in pred:
            return True
    return False


def _first_user_text(messages: Any) -> str | None:
    if not isinstance(messages, list):
        return None
    for msg in messages:
        if isinstance(msg, Mapping) and msg.get("role") == "user":
            content = msg.get("content")
            if isinstance(content, str):
                return content
            if isinstance(content, list):
                return "".join(p.get("text", "") for p in content
                               if isinstance(p, Mapping) and p.get("type") == "text")
            return None
    return None


class JudgeResponder:
    """A ``Responder`` for correctness-judge requests (see the module docstring)."""

    def __init__(self, *, noise: float = 0.0, malformed: float = 0.0, malformed_tries: int = 0,
                 think: bool = False, seed: int = 0) -> None:
        if not (0.0 <= noise <= 1.0 and 0.0 <= malformed <= 1.0) or malformed_tries < 0:
            raise ValueError("noise and malformed must be in [0, 1], malformed_tries >= 0")
        self.noise, self.malformed, self.malformed_tries = noise, malformed, malformed_tries
        self.think, self.seed = think, seed
        self._lock = threading.Lock()
        self.calls = 0

    def __call__(self, req: SimRequest) -> SimReply | None:
        messages = req.body.get("messages")
        prompt = _first_user_text(messages)
        if prompt is None or not prompt.startswith(JUDGE_MARKER):
            return None
        with self._lock:
            self.calls += 1
        model = str(req.body.get("model", ""))
        key = v1_text(prompt)
        tries = sum(1 for m in messages if isinstance(m, Mapping) and m.get("role") == "assistant")
        if tries < self.malformed_tries or unit_hash(self.seed, model, key, "bad") < self.malformed:
            return SimReply(_GARBAGE[tries % len(_GARBAGE)])
        parts = split_prompt(prompt)
        if parts is None:
            return SimReply("I cannot find the answers to compare.")
        _, references, prediction = parts
        correct = matches(prediction, references)
        if unit_hash(self.seed, model, key, "noise") < self.noise:
            correct = not correct
        reasoning = ("The prediction gives the reference answer." if correct
                     else "The prediction does not give the reference answer.")
        reply = orjson.dumps({"reasoning": reasoning, "verdict": "A" if correct else "B"}).decode()
        if self.think:
            reply = f"<think>Compare the prediction with the reference.</think>\n{reply}"
        return SimReply(reply)
