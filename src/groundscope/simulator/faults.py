"""The simulator's hostile replies: what an endpoint nobody should trust may send back.

Turned on by :class:`~groundscope.simulator.oracle.SimBehaviour` knobs (and the
``groundscope simulate`` flags of the same names):

- ``malformed_body``: which broken 200 body a ``malformed`` fault sends, one of
  :data:`MALFORMED_BODIES` (``"each"``: every kind in turn; the request's record names it);
- ``reply_bytes``: every answer padded to this many bytes of content, streamed (never held
  in memory); ``reply_gzip`` sends it gzip-encoded, compressed on the fly (with a large
  ``reply_bytes``, a gzip bomb: 300 MB decode from ~300 KB); ``reply_chunked`` streams it
  chunked without a Content-Length (with a huge ``reply_bytes``, an endless reply);
- ``declared_length``: every answer declares this Content-Length, sends its short body and
  hangs up;
- ``header_bytes``: every answer carries an ``X-Padding`` header this long;
- ``redirect_to``: every chat request is answered ``307`` with this ``Location``;
- ``echo_key``: the credential of the request's Authorization header (a Bearer key, or the
  password of Basic auth) or its ``x-api-key`` is echoed back in many forms
  (:func:`echo_forms`): in a 401 error body (``"error"``), or in the completion text, its
  reasoning and its model name (``"reply"``);
- ``usage_count``: every token count of every reply's ``usage`` (details included) is
  reported as this number (:func:`with_usage_count`), e.g. ``2**31 - 1`` each.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
import zlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol
from urllib.parse import quote

import orjson
from aiohttp import web

from groundscope.simulator.wire import SimReply

Record = Callable[..., None]


def with_usage_count(body: dict[str, Any], count: int | None) -> dict[str, Any]:
    """``body`` with every integer under its ``usage`` (at any depth) replaced by ``count``
    (None: ``body`` as it is)."""
    def inflate(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: inflate(v) for k, v in value.items()}
        return count if isinstance(value, int) and not isinstance(value, bool) else value

    return {**body, "usage": inflate(body["usage"])} if "usage" in body and count is not None else body


class Knobs(Protocol):
    """The hostile knobs of ``oracle.SimBehaviour`` (read here, defined there)."""

    reply_bytes: int
    reply_gzip: bool
    reply_chunked: bool
    declared_length: int | None
    header_bytes: int
    redirect_to: str | None
    echo_key: str | None

    @property
    def streams_reply(self) -> bool: ...

_OK = b'{"choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}]'

MALFORMED_BODIES: dict[str, bytes] = {
    "truncated": b'{"id": "chatcmpl-broken", "choices": [{"index": 0, "mes',
    "not_json": b"<html><body>502 Bad Gateway</body></html>",
    "not_object": b'["choices", "message", "content"]',
    "no_choices": b'{"id": "chatcmpl-x", "object": "chat.completion"}',
    "empty_choices": b'{"choices": []}',
    "choices_not_list": b'{"choices": {"0": {"message": {"content": "hi"}}}}',
    "choice_not_object": b'{"choices": ["hi"]}',
    "message_string": b'{"choices": [{"message": "hi"}]}',
    "message_null": b'{"choices": [{"message": null}]}',
    "content_number": b'{"choices": [{"message": {"content": 42}}]}',
    "content_part_number": b'{"choices": [{"message": {"content": [{"type": "text", "text": 7}]}}]}',
    "usage_string": _OK + b', "usage": {"prompt_tokens": "abc"}}',
    "usage_negative": _OK + b', "usage": {"prompt_tokens": -5, "completion_tokens": 1}}',
    "usage_huge": _OK + b', "usage": {"total_tokens": 1000000000000000000000000000000}}',
    "usage_float": _OK + b', "usage": {"completion_tokens": 1.5}}',
    "finish_reason_number": b'{"choices": [{"message": {"content": "hi"}, "finish_reason": 3}]}',
    "nan": b'{"choices": [{"message": {"content": NaN}}]}',
    "deep": _OK + b', "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
}
"""Bodies a 200 must not have: each is a ``malformed_response`` for the client."""


def malformed_kind(kind: str, seq: int) -> str:
    """``kind``, or for ``"each"`` the kinds in turn by request number ``seq``."""
    return list(MALFORMED_BODIES)[seq % len(MALFORMED_BODIES)] if kind == "each" else kind


# ---------------------------------------------------------------- echoed credentials


def credential(authorization: str | None) -> str | None:
    """The secret of an Authorization header: a Bearer token, or Basic auth's password."""
    scheme, _, value = (authorization or "").partition(" ")
    if scheme.lower() == "bearer":
        return value.strip() or None
    if scheme.lower() == "basic":
        try:
            user, _, password = base64.b64decode(value.strip()).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        return password or user or None
    return None


def echo_forms(secret: str) -> list[str]:
    """``secret`` as careless servers echo it back: cased, encoded, escaped, cut."""
    half = len(secret) // 2
    return [
        secret,
        secret.upper(),
        secret.lower(),
        f"Bearer {secret}",
        base64.b64encode(secret.encode()).decode(),
        base64.b64encode(f"Bearer {secret}".encode()).decode(),
        base64.urlsafe_b64encode(f"user:{secret}".encode()).decode(),
        quote(secret, safe=""),
        "".join(f"%{b:02X}" for b in secret.encode()),
        "".join(f"\\u{ord(c):04x}" if i % 2 else c for i, c in enumerate(secret)),
        "".join(f"&#{ord(c)};" for c in secret),
        secret.encode().hex(),
        secret[: len(secret) - 3] + "...",
        "..." + secret[3:],
        secret[:half] + "\u2026",
    ]


def echo_text(authorization: str | None) -> str:
    """A sentence quoting the request's credential in every form (empty without one)."""
    secret = credential(authorization)
    if secret is None:
        return ""
    return " | ".join(["you sent", *echo_forms(secret)])


def echo_error(authorization: str | None) -> web.Response:
    """A 401 whose message quotes the credential, one form written with raw JSON escapes."""
    secret = credential(authorization) or ""
    escaped = "".join(f"\\u{ord(c):04x}" if i % 3 == 0 else c for i, c in enumerate(secret))
    text = echo_text(authorization).replace("\\", "\\\\").replace('"', '\\"')
    body = (f'{{"error": {{"message": "Incorrect API key provided: {escaped}. {text}", '
            f'"type": "invalid_request_error", "code": "invalid_api_key"}}}}')
    return web.Response(status=401, body=body.encode(), content_type="application/json")


def echo_reply(reply: SimReply, model: str, authorization: str | None) -> tuple[SimReply, str]:
    """A reply (and model name) with the credential echoed in its text, its reasoning and
    the model name, whatever API renders it."""
    echo = echo_text(authorization)
    if not echo:
        return reply, model
    echoed = dataclasses.replace(reply, content=f"{reply.content}\n{echo}", reasoning=echo)
    return echoed, f"{model} {credential(authorization)!s}".upper()


def credential_header(request: web.Request) -> str | None:
    """The request's credential as an Authorization value: that header, or an Anthropic
    ``x-api-key`` as a Bearer token."""
    key = request.headers.get("x-api-key")
    return request.headers.get("Authorization") or (f"Bearer {key}" if key else None)


# ---------------------------------------------------------------- large replies


def _frame(model: str) -> tuple[bytes, bytes]:
    """The JSON of a completion around its content: (before it, after it)."""
    head = (b'{"object": "chat.completion", "model": ' + orjson.dumps(model) +
            b', "choices": [{"index": 0, "finish_reason": "stop", "message": '
            b'{"role": "assistant", "content": "')
    return head, b'"}}]}'


def _padded_pieces(content_bytes: int, model: str) -> Iterator[bytes]:
    """A completion body whose content is ``content_bytes`` of 'a', in pieces."""
    head, tail = _frame(model)
    yield head
    block = b"a" * (256 * 1024)
    left = content_bytes
    while left > 0:
        yield block[: min(left, len(block))]
        left -= len(block)
    yield tail


def _gzipped(pieces: Iterator[bytes]) -> Iterator[bytes]:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    for piece in pieces:
        out = packer.compress(piece)
        if out:
            yield out
    yield packer.flush()


async def stream_reply(request: web.Request, content_bytes: int, model: str, *, gzip: bool,
                       chunked: bool, sent: list[int]) -> web.StreamResponse:
    """Send a reply of ``content_bytes`` content without holding it; ``sent[0]`` counts the
    bytes written (up to when the client hung up, or all of them)."""
    pieces = _padded_pieces(content_bytes, model)
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    if gzip:
        pieces = _gzipped(pieces)
        resp.headers["Content-Encoding"] = "gzip"
    if gzip or chunked:
        resp.enable_chunked_encoding()
    else:
        head, tail = _frame(model)
        resp.content_length = len(head) + content_bytes + len(tail)
    await resp.prepare(request)
    try:
        for piece in pieces:
            await resp.write(piece)
            sent[0] += len(piece)
        await resp.write_eof()
    except (ConnectionError, RuntimeError):  # the client stopped reading: fine
        pass
    return resp


async def lying_length(request: web.Request, declared: int, body: bytes) -> web.StreamResponse:
    """``body`` under a Content-Length of ``declared``, then the connection is dropped."""
    resp = web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
    resp.content_length = declared
    await resp.prepare(request)
    with contextlib.suppress(ConnectionError, RuntimeError):
        await resp.write(body)
    if request.transport is not None:
        request.transport.close()
    return resp


async def hostile_reply(request: web.Request, b: Knobs, info: dict[str, Any],
                        record: Record) -> web.StreamResponse | None:
    """A redirect, an echoed key in a 401, or a huge / gzip-bombed / endless / lying reply,
    when the behaviour asks for one; else None. ``record(request, status, **fields)`` is the
    server's request log."""
    if b.redirect_to:
        record(request, 307, fault="redirect", **info)
        return web.Response(status=307, headers={"Location": b.redirect_to})
    if b.echo_key == "error":
        record(request, 401, fault="echo", **info)
        return echo_error(credential_header(request))
    if b.header_bytes:
        record(request, 200, fault="header_bytes", **info)
        body = orjson.dumps({"choices": [{"message": {"content": "short"}}]})
        return web.Response(body=body, content_type="application/json",
                            headers={"X-Padding": "a" * b.header_bytes})
    if b.declared_length is not None:
        record(request, 200, fault="declared_length", **info)
        body = orjson.dumps({"choices": [{"message": {"content": "short"}}]})
        return await lying_length(request, b.declared_length, body)
    if b.streams_reply:
        sent = [0]
        try:  # recorded also when the client hangs up and this handler is cancelled
            return await stream_reply(request, b.reply_bytes, info["model"], gzip=b.reply_gzip,
                                      chunked=b.reply_chunked, sent=sent)
        finally:
            record(request, 200, fault="large_reply", sent_bytes=sent[0], **info)
    return None
