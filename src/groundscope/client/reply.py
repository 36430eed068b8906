"""A chat-completions reply body -> :class:`~groundscope.types.Completion` (pure).

The reply is validated by a pydantic model of what the API promises, lax where the API is
lax: unknown fields are ignored; ``model``, ``finish_reason``, ``usage`` and each usage field
may be missing or null; ``content`` is a string, null, or a list of parts (strings, or
objects whose ``text``, when present, is a string; other parts such as images are skipped);
``reasoning_content`` / ``reasoning`` are used when they are strings; ``usage`` is read with
its ``prompt_tokens_details.cached_tokens`` and ``completion_tokens_details.reasoning_tokens``
(each optional). Anything else (not
JSON, NaN where a value is read, JSON nested deeper than the parser's limit, not an object,
``choices`` missing, empty or not a list, a message that is not an object, content of
another type, a usage count that is not a non-negative integer below 2**31, a
``finish_reason`` that is not a string) is a :class:`~groundscope.errors.RetryableError`
of kind ``malformed_response``: the sample fails (after the usual retries), the run goes on.

A 200 body without choices that carries an error message (``{"error": {...}}``) is the
server's refusal: a ``ResponseError`` (kind ``context_length`` / ``content_filter`` when it
says so, else ``no_choices``). An empty reply cut by a content filter, or one whose message
carries only a ``refusal`` (OpenAI's structured refusal), is a ``ResponseError`` of kind
``content_filter``.

>>> parse_completion(b'{"choices": [{"message": {"content": "Paris"}}]}').text
'Paris'
>>> parse_completion(b'{"choices": [{"message": "hi"}]}')
Traceback (most recent call last):
...
groundscope.errors.RetryableError: malformed response: choices.0.message: Input should be an object
"""

from __future__ import annotations

from typing import Annotated, Any

import orjson
from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError

from groundscope.client.http_errors import error_kind, error_message, truncate
from groundscope.errors import ResponseError, RetryableError
from groundscope.types import MAX_TOKEN_COUNT, Completion, Usage

TokenCount = Annotated[StrictInt, Field(ge=0, le=MAX_TOKEN_COUNT)]


class LaxModel(BaseModel):
    """Unknown fields ignored; the fields we read have the types the API promises."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)


class ReplyPart(LaxModel):
    type: StrictStr | None = None
    text: StrictStr | None = None


class ReplyMessage(LaxModel):
    content: StrictStr | list[StrictStr | ReplyPart] | None = None
    refusal: Any = None  # OpenAI's structured refusal: the model declined (never the answer)
    reasoning_content: Any = None
    reasoning: Any = None

    def text(self) -> str:
        content = self.content
        if content is None or isinstance(content, str):
            return content or ""
        return "".join(p if isinstance(p, str) else p.text or "" for p in content)

    def reasoning_text(self) -> str | None:
        value = self.reasoning_content if self.reasoning_content is not None else self.reasoning
        return value if isinstance(value, str) else None


class ReplyChoice(LaxModel):
    message: ReplyMessage
    finish_reason: StrictStr | None = None


class PromptDetails(LaxModel):
    """``prompt_tokens_details`` (chat) / ``input_tokens_details`` (Responses)."""

    cached_tokens: TokenCount | None = None


class CompletionDetails(LaxModel):
    """``completion_tokens_details`` (chat) / ``output_tokens_details`` (Responses)."""

    reasoning_tokens: TokenCount | None = None


class ReplyUsage(LaxModel):
    prompt_tokens: TokenCount | None = None
    completion_tokens: TokenCount | None = None
    total_tokens: TokenCount | None = None
    prompt_tokens_details: PromptDetails | None = None
    completion_tokens_details: CompletionDetails | None = None

    def usage(self) -> Usage:
        prompt, completion = self.prompt_tokens_details, self.completion_tokens_details
        return token_usage(self.prompt_tokens, self.completion_tokens, self.total_tokens,
                           reasoning=completion.reasoning_tokens if completion else None,
                           cached=prompt.cached_tokens if prompt else None)


def token_usage(prompt: int | None, completion: int | None, total: int | None, *,
                reasoning: int | None = None, cached: int | None = None) -> Usage:
    """A reply's token counts (missing: 0; a missing total: the sum of the other two).
    Reasoning tokens are part of the completion's, cached ones of the prompt's: a reply
    that says more is held to its totals, so it cannot make a cost negative. Each count,
    and a sum of them, saturates at ``MAX_TOKEN_COUNT`` (``types.Usage``): a reply whose
    counts are all 2**31 - 1 is read, and written as a row groundscope reads back.

    >>> token_usage(10, 5, None, reasoning=9, cached=40)
    Usage(prompt_tokens=10, completion_tokens=5, total_tokens=15, reasoning_tokens=5, cached_tokens=10)
    >>> token_usage(MAX_TOKEN_COUNT, MAX_TOKEN_COUNT, None).total_tokens == MAX_TOKEN_COUNT
    True
    """
    prompt, completion = prompt or 0, completion or 0
    return Usage(prompt, completion, total if total is not None else prompt + completion,
                 reasoning_tokens=min(reasoning or 0, completion),
                 cached_tokens=min(cached or 0, prompt))


class ChatReply(LaxModel):
    """The part of a chat-completions reply groundscope reads."""

    model: StrictStr | None = None
    choices: list[ReplyChoice] | None = None
    usage: ReplyUsage | None = None


def malformed(err: ValidationError) -> RetryableError:
    """The ``malformed_response`` error of a reply that failed its model (first problem named)."""
    first = err.errors(include_input=False, include_url=False)[0]
    where = ".".join(str(p) for p in first["loc"])
    more = f" (and {err.error_count() - 1} more)" if err.error_count() > 1 else ""
    detail = f"{where}: {first['msg']}" if where else first["msg"]
    return RetryableError(f"malformed response: {truncate(detail)}{more}",
                          kind="malformed_response", status=200)


def empty_reply(raw: bytes, missing: str) -> ResponseError | RetryableError:
    """The error of a 200 body without ``missing`` (``choices``, ``content``): a
    ``ResponseError`` when it carries an error object, else a retryable malformed response."""
    try:
        payload: Any = orjson.loads(raw)
    except orjson.JSONDecodeError:  # e.g. a NaN in a field the reply model ignored
        payload = None
    detail = error_message(payload) if isinstance(payload, dict) else ""
    if not detail:
        return RetryableError(f"malformed response: no {missing}", kind="malformed_response",
                              status=200)
    return ResponseError(f"response has no {missing}: {truncate(detail)}",
                         kind=error_kind(payload, detail, f"no_{missing}"), status=200)


def parse_completion(raw: bytes) -> Completion:
    """The ``Completion`` of a 200 reply body (raises as the module docstring says)."""
    try:
        reply = ChatReply.model_validate_json(raw)
    except ValidationError as err:
        raise malformed(err) from None
    if not reply.choices:
        raise empty_reply(raw, "choices")
    choice = reply.choices[0]
    text = choice.message.text()
    finish = choice.finish_reason
    if isinstance(choice.message.refusal, str) and choice.message.refusal:
        finish = "content_filter"
    if finish == "content_filter" and not text:
        raise ResponseError("the reply was blocked by a content filter", kind="content_filter",
                            status=200)
    return Completion(
        text=text,
        model=reply.model or "",
        finish_reason=finish,
        usage=reply.usage.usage() if reply.usage is not None else Usage(),
        reasoning=choice.message.reasoning_text(),
    )
