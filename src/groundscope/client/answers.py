"""The client of ``--eval-type answers``: the model's answers are read, never requested.

:class:`AnswersClient` has the per-sample interface of :class:`~groundscope.client.chat.ChatClient`
(``model``, ``sample_hash``, ``complete_sample``, ``aclose``), so ``pipeline.evaluate_sample``
stores, resumes and scores a read answer on the one path a requested answer takes. An answer
comes from a :data:`Lookup` (an answers file joined by sample id: ``answers/``) or, without
one, from the record itself (``Sample.answer``, the dataset's ``prediction`` field). It sends
nothing: no URL, no key, no socket.

The request hash is the model request's (messages, media identities, model name) plus the
answer text, so a resumed run reuses a saved prediction only for the very same answer.

>>> import asyncio
>>> from pathlib import Path
>>> from groundscope.types import Message, Origin
>>> s = Sample("q1", "d", "default", (Message("user", "hi"),), Origin(Path("d.jsonl"), 1), answer="4")
>>> asyncio.run(AnswersClient("mine").complete_sample(s, 0)).text
'4'
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from groundscope.client.openai import request_hash
from groundscope.client.retry import OnRetry
from groundscope.defaults import DEFAULT_ANSWERS_MODEL
from groundscope.errors import ModelError
from groundscope.types import Completion, Sample

__all__ = ["AnswersClient", "Lookup"]

# (sample, repeat) -> the answer, or None when there is none
Lookup = Callable[[Sample, int], str | None]


def _record_answer(sample: Sample, repeat: int) -> str | None:
    return sample.answer


class AnswersClient:
    """Answers by lookup (default: the record's own ``Sample.answer``), as completions."""

    def __init__(self, model: str = DEFAULT_ANSWERS_MODEL, lookup: Lookup | None = None) -> None:
        self.model = model
        self.generation_config: Mapping[str, Any] = {}
        self.lookup: Lookup = lookup or _record_answer
        self.requests = 0  # answers handed out (no request is ever sent)

    def _answer(self, sample: Sample, repeat: int) -> str:
        answer = self.lookup(sample, repeat)
        if answer is None:  # the runner skips these first; reaching here is a caller's bug
            raise ModelError(f"{sample.id}: no answer", kind="no_answer")
        return answer

    def sample_hash(self, sample: Sample, repeat: int) -> str:
        """The model request's hash with the answer in it."""
        base = request_hash(sample.messages, self.model, None)
        answer = self.lookup(sample, repeat) or ""
        return hashlib.sha256(f"{base}\0answer\0{answer}".encode()).hexdigest()

    async def complete_sample(self, sample: Sample, repeat: int, *,
                              on_retry: OnRetry | None = None) -> Completion:
        self.requests += 1
        return Completion(self._answer(sample, repeat), model=self.model, finish_reason="stop")

    async def aclose(self) -> None:
        """Nothing to close (the interface of ``ChatClient``)."""
