"""The LLM judge panel: asks each judge model for a verdict and takes the majority.

One :class:`JudgePanel` serves a whole run (``ScoringContext.shared``). Each judge model gets
one ``ChatClient``, created on first use inside the running loop (concurrency
``judge_concurrency``, temperature 0 unless the model's ``generation_config`` says otherwise)
and closed by ``ScoringContext.aclose``, behind one
:class:`~groundscope.client.cache.CachedChat` per purpose. Verdicts are cached in
``<run_dir>/cache/judge.jsonl``, so re-scoring and resumed runs repeat no call.

Per judge, a reply that breaks the verdict contract is repaired up to
``JudgeConfig.max_repairs`` times (``judge_prompt.repair_messages``); transport failures are
retried by the client's own policy. A judge that still gives no verdict casts no vote. The
panel's verdict is the strict majority of the votes cast; no vote, or a tie, is
``judge_failed`` — never a 0 or a 1. A judge endpoint that answers 401/403/404 is marked
unavailable for the rest of the run, so a wrong key or URL costs one request, not one per
sample.

``api_url: "mock"`` names the offline simulator whose URL the caller put in
``ScoringContext.mock_url``: the run's own in ``eval_type=mock``, or a judge-only one that
``groundscope score`` starts (:func:`mock_judged`). Scoring never starts a simulator itself;
without a URL a mock judge is a ``ConfigError``.

The verdict is one use of :meth:`JudgePanel.ask`, the generic step "ask judge *i* this
request, parse the reply with this contract, repair a broken reply a bounded number of
times". The grounding steps (claim extraction, verification, completeness, equivalence;
``scoring/grounding.py``) use it too, each with its own ``purpose``: its own cache file
``<run_dir>/cache/<purpose>.jsonl``, over the same per-model HTTP client. Every reply
(requested or from the cache) is counted in the caller's ``usage.metering`` scope under its
step (``usage.step_of(purpose)``) and the judge's model id.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import orjson

from groundscope.errors import ConfigError, GroundscopeError, MediaError, ModelError, ResponseError
from groundscope.redaction import Redactor
from groundscope.scoring.agreement import human_label
from groundscope.scoring.json_reply import ReplyError
from groundscope.scoring.judge_prompt import judge_messages, parse_verdict, repair_messages
from groundscope.types import Message, Sample
from groundscope.usage import record_call, step_of

if TYPE_CHECKING:
    from groundscope.client.cache import CachedChat, ResponseCache
    from groundscope.client.chat import ChatClient
    from groundscope.config import JudgeConfig, JudgeModel
    from groundscope.scoring.base import ScoringContext

log = logging.getLogger("groundscope")

MOCK_URL = "mock"
_FATAL_STATUS = frozenset({401, 403, 404})
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Reply(Generic[T]):
    """What :meth:`JudgePanel.ask` got from one judge: a parsed ``value``, or an ``error``
    (``broke_contract``: the judge answered every try, but never as its contract says)."""

    judge: str
    value: T | None
    attempts: int
    error: str | None = None
    broke_contract: bool = False


@dataclass(frozen=True, slots=True)
class Vote:
    """One judge's answer: ``label`` ``A``/``B``, or None with ``error`` when it gave none."""

    judge: str
    label: str | None
    reasoning: str = ""
    attempts: int = 0
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"judge": self.judge, "verdict": self.label,
                               "reasoning": self.reasoning, "attempts": self.attempts}
        if self.error is not None:
            out["error"] = self.error
        return out


def majority(votes: Sequence[Vote]) -> tuple[str | None, str | None]:
    """``(label, None)`` for a strict majority of the cast votes, else ``(None, why)``.

    >>> majority([Vote("a", "A"), Vote("b", "B"), Vote("c", "A")])
    ('A', None)
    >>> majority([Vote("a", "A"), Vote("b", "B")])
    (None, 'tie between judges')
    >>> majority([Vote("a", None, error="no JSON")])
    (None, 'no judge gave a verdict')
    """
    cast = [v.label for v in votes if v.label is not None]
    if not cast:
        return None, "no judge gave a verdict"
    n_a = cast.count("A")
    n_b = len(cast) - n_a
    if n_a == n_b:
        return None, "tie between judges"
    return ("A" if n_a > n_b else "B"), None


@dataclass(frozen=True, slots=True)
class Outcome:
    """The panel's decision on one prediction, and everything needed to audit it."""

    label: str | None
    votes: tuple[Vote, ...]
    failure: str | None = None
    human: bool | None = None
    note: str | None = None

    @property
    def ok(self) -> bool:
        return self.label is not None

    @property
    def correct(self) -> bool:
        return self.label == "A"

    def detail(self) -> dict[str, Any]:
        """``Score.detail`` of a judged sample (read back by ``report/judge.py``)."""
        out: dict[str, Any] = {"verdict": self.label, "votes": [v.to_json() for v in self.votes]}
        if len(self.votes) == 1:
            out["reasoning"] = self.votes[0].reasoning
        if self.failure:
            out["judge_failed"] = self.failure
        if self.note:
            out["note"] = self.note
        if self.human is not None:
            out["human_label"] = "correct" if self.human else "incorrect"
        return out


@dataclass(frozen=True, slots=True)
class Decision:
    """A saved panel decision, read back from a score's ``detail`` (what
    :meth:`Outcome.detail` wrote): ``failed`` the reason it gave no verdict, ``votes`` each
    cast vote (True: correct), ``verdict`` and ``human`` (True: correct; None: none)."""

    failed: str | None
    votes: tuple[bool, ...]
    verdict: bool | None
    human: bool | None


_VERDICTS = {"A": True, "B": False}
_HUMAN_LABELS = {"correct": True, "incorrect": False}


def is_judged(detail: Mapping[str, Any]) -> bool:
    """Whether a score's ``detail`` holds a panel decision (its votes)."""
    return "votes" in detail


def read_decision(detail: Mapping[str, Any]) -> Decision:
    """The panel decision a judged score's ``detail`` holds (a saved, so untrusted, row:
    anything malformed reads as absent).

    >>> read_decision({"verdict": "A", "votes": [{"verdict": "A"}, {"verdict": None}],
    ...                "human_label": "incorrect"})
    Decision(failed=None, votes=(True,), verdict=True, human=False)
    """
    failed = detail.get("judge_failed")
    cast = detail.get("votes")
    votes = tuple(_VERDICTS[v["verdict"]] for v in (cast if isinstance(cast, list) else ())
                  if isinstance(v, Mapping) and isinstance(v.get("verdict"), str)
                  and v["verdict"] in _VERDICTS)
    verdict, human = detail.get("verdict"), detail.get("human_label")
    return Decision(str(failed) if failed else None, votes,
                    _VERDICTS.get(verdict) if isinstance(verdict, str) else None,
                    _HUMAN_LABELS.get(human) if isinstance(human, str) else None)


class JudgePanel:
    """The run's judge models behind one ``decide(sample, prediction)`` call."""

    def __init__(self, ctx: ScoringContext, cfg: JudgeConfig) -> None:
        self.ctx = ctx
        self.cfg = cfg
        self.ids = judge_ids(cfg.models)
        self._chats: dict[tuple[int, str, str], CachedChat] = {}
        self._clients: dict[int, ChatClient] = {}
        self._connecting = asyncio.Lock()
        self._broken: dict[int, str] = {}
        self._redactor = Redactor(s for m in cfg.all_models() for s in m.secrets())

    @property
    def requests(self) -> int:
        """Judge requests actually sent (cache hits excluded)."""
        return sum(c.requests for c in self._chats.values())

    async def decide(self, sample: Sample, prediction: str) -> Outcome:
        """Every judge's vote on ``prediction``, combined by :func:`majority`."""
        human = human_label(sample.metadata.get(self.cfg.human_label_field,
                                                sample.metadata.get("human_label")))
        if not prediction.strip():
            return Outcome("B", (), human=human, note="empty prediction: incorrect without a judge")
        messages = judge_messages(sample, prediction, multimodal=self.cfg.multimodal)
        votes = await asyncio.gather(*(self._vote(i, messages) for i in range(len(self.ids))))
        label, failure = majority(votes)
        return Outcome(label, tuple(votes), failure, human)

    async def _vote(self, i: int, messages: tuple[Message, ...]) -> Vote:
        reply = await self.ask(i, messages, parse_verdict)
        if reply.value is None:
            return Vote(reply.judge, None, attempts=reply.attempts, error=reply.error)
        return Vote(reply.judge, reply.value.label, reply.value.reasoning, reply.attempts)

    async def ask(self, i: int, messages: tuple[Message, ...], parse: Callable[[str], T], *,
                  purpose: str = "judge", shape: str | None = None,
                  overrides: Mapping[str, Any] | None = None) -> Reply[T]:
        """Judge ``i``'s reply to ``messages``, read by ``parse`` (which raises ``ReplyError``).

        A broken reply gets up to ``max_repairs`` repair turns (``shape`` is the JSON the
        repair turn asks for; default: the verdict's). A reply longer than
        ``max_reply_chars`` is broken too: it is never parsed, and its repair turn quotes
        only its first ``max_reply_chars`` characters. Replies are cached under ``purpose``;
        ``overrides`` are merged over the model's generation config (e.g. a vote's seed).
        """
        judge = self.ids[i]
        if i in self._broken:
            return Reply(judge, None, 0, self._broken[i])
        chat = self._chat(i, purpose, overrides or {})
        cap = self.cfg.max_reply_chars
        problem = ""
        for attempt in range(1, self.cfg.max_repairs + 2):
            try:
                completion = await chat.complete(messages)
            except MediaError as exc:
                return Reply(judge, None, attempt, f"media: {exc}")
            except ModelError as exc:
                error = self._redactor.redact(f"{exc.kind}: {exc}")
                if isinstance(exc, ResponseError) and exc.status in _FATAL_STATUS:
                    self._mark_broken(i, error)
                return Reply(judge, None, attempt, error)
            except GroundscopeError as exc:  # e.g. the client could not be built
                self._mark_broken(i, self._redactor.redact(str(exc)))
                return Reply(judge, None, attempt, self._broken[i])
            text = completion.text
            try:
                if len(text) > cap:
                    raise ReplyError(f"the reply is {len(text)} characters long, over the "
                                     f"limit of {cap} (judge.max_reply_chars)")
                return Reply(judge, parse(text), attempt)
            except ReplyError as exc:
                problem = str(exc)
                log.debug("judge %s (%s): unusable reply (%s), attempt %d", judge, purpose,
                          problem, attempt)
                messages = repair_messages(messages, text[:cap], problem, shape=shape)
        what = "verdict" if purpose == "judge" else f"{purpose} reply"
        return Reply(judge, None, self.cfg.max_repairs + 1,
                     f"no usable {what} after {self.cfg.max_repairs + 1} replies: {problem}",
                     broke_contract=True)

    def _mark_broken(self, i: int, error: str) -> None:
        if i not in self._broken:
            self._broken[i] = f"judge unavailable: {error}"
            log.error("judge %s: %s; its votes are judge_failed for the rest of the run",
                      self.ids[i], error)

    def _chat(self, i: int, purpose: str, overrides: Mapping[str, Any]) -> CachedChat:
        key = (i, purpose, orjson.dumps(overrides, option=orjson.OPT_SORT_KEYS).decode())
        chat = self._chats.get(key)
        if chat is None:
            from groundscope.client.cache import CachedChat

            model = self.cfg.models[i]
            mock_url(self.ctx, model)  # no simulator to talk to: an error now, not a vote lost
            step = step_of(purpose)
            chat = CachedChat(response_cache(self.ctx, purpose), model_id=model.model_id,
                              api_url=model.api_url, api=model.eval_type,
                              generation_config={**model.generation_config, **overrides},
                              connect=lambda: self._client(i),
                              on_reply=lambda c, cached: record_call(step, model.model_id,
                                                                     c.usage, cached))
            self._chats[key] = chat
        return chat

    async def _client(self, i: int) -> ChatClient:
        """Judge ``i``'s HTTP client, one per model whatever the purpose; closed with the context."""
        async with self._connecting:
            client = self._clients.get(i)
            if client is None:
                client = self._clients[i] = await self._connect(self.cfg.models[i])
                self.ctx.on_close(client.aclose)
                self.ctx.judge_clients.append(client)  # the live view reads its counters
            return client

    async def _connect(self, model: JudgeModel) -> ChatClient:
        from groundscope.client.apis import wire_api
        from groundscope.client.chat import ChatClient
        from groundscope.client.retry import RetryPolicy

        url = mock_url(self.ctx, model) or model.api_url
        if self.ctx.judge_gate is not None:  # a Ray worker: the gate every worker shares
            gate = self.ctx.judge_gate(model)
        else:
            gate = self.ctx.gate(f"judge:{model.model_id}", url, model.model_id,
                                 self.ctx.judge_concurrency, rpm=model.rpm, tpm=model.tpm,
                                 max_pause=self.ctx.retry_max_delay)
        return ChatClient(url, model.model_id, api_key=model.api_key, gate=gate,
                          generation_config=model.generation_config, timeout=self.ctx.timeout,
                          retry=RetryPolicy(max_retries=self.ctx.max_retries,
                                            base_delay=self.ctx.retry_base_delay,
                                            max_delay=self.ctx.retry_max_delay,
                                            rate_limit_budget=self.ctx.rate_limit_budget),
                          concurrency=self.ctx.judge_concurrency,
                          max_response_bytes=self.ctx.max_response_bytes,
                          wire=wire_api(model.eval_type))


def mock_judged(judge: JudgeConfig | None) -> bool:
    """Whether a judge model (grounding block included) names the offline simulator."""
    return judge is not None and any(m.api_url == MOCK_URL for m in judge.all_models())


def mock_url(ctx: ScoringContext, model: JudgeModel) -> str | None:
    """The simulator URL the caller handed over for a ``"mock"`` judge (None for a real one);
    a ``ConfigError`` when none was."""
    if model.api_url != MOCK_URL:
        return None
    if ctx.mock_url is None:
        raise ConfigError(f"judge {model.model_id!r}: api_url 'mock' names the offline simulator, "
                          "but none was started for this run (ScoringContext.mock_url is unset)")
    return ctx.mock_url


def response_cache(ctx: ScoringContext, purpose: str) -> ResponseCache:
    """The run's cache for ``purpose`` (``<run_dir>/cache/<purpose>.jsonl``), shared and closed
    with the context. Without a run directory it lives in memory."""
    from groundscope.client.cache import ResponseCache

    def make() -> ResponseCache:
        if ctx.reply_cache is not None:
            cache = ctx.reply_cache(purpose)
        else:
            path = ctx.run_dir / "cache" / f"{purpose}.jsonl" if ctx.run_dir is not None else None
            cache = ResponseCache(path)

        async def close() -> None:
            cache.close()

        ctx.on_close(close)
        return cache

    return ctx.shared(f"cache:{purpose}", make)


def judge_ids(models: Sequence[JudgeModel]) -> list[str]:
    """Display ids: the model ids, made unique with ``#2``, ``#3`` where they repeat."""
    ids: list[str] = []
    for m in models:
        name, n = m.model_id, 1
        while name in ids:
            n += 1
            name = f"{m.model_id}#{n}"
        ids.append(name)
    return ids


def judge_panel(ctx: ScoringContext | None) -> JudgePanel | None:
    """The run's panel when the judge strategy calls an LLM (``llm`` / ``llm_recall``)."""
    cfg = ctx.judge if ctx is not None else None
    if ctx is None or cfg is None or cfg.strategy not in ("llm", "llm_recall") or not cfg.models:
        return None
    return ctx.shared("judge:panel", lambda: JudgePanel(ctx, cfg))
