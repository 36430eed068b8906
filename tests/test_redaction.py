"""The one redactor (``groundscope.redaction``) and the reply contract (``client/reply.py``),
as pure functions: every echoed form of a key is found, URLs lose their credentials, every
broken 200 body is ``malformed_response``."""

from __future__ import annotations

import base64
import doctest
import json

import pytest

from groundscope import redaction
from groundscope.client import reply
from groundscope.client.openai import endpoint_auth, normalise_url
from groundscope.client.reply import parse_completion
from groundscope.errors import ConfigError, RetryableError
from groundscope.redaction import Redactor, redact_url, url_secrets
from groundscope.simulator.faults import MALFORMED_BODIES, echo_forms

KEY = "sk-proj-Zq81rT5vLw0XbN3yHc7uPe2d"


def test_doctests() -> None:
    for module in (redaction, reply):
        result = doctest.testmod(module)
        assert result.attempted and not result.failed


@pytest.mark.parametrize("form", echo_forms(KEY))
def test_every_echoed_form_of_a_key_is_hidden(form: str) -> None:
    out = Redactor([KEY]).redact(f'{{"error": "bad key: {form}!"}}')
    assert out.startswith('{"error": "bad key: ') and "***" in out
    assert KEY[:14] not in out and KEY[-14:] not in out


@pytest.mark.parametrize("text", [
    json.dumps({"msg": KEY}).replace("-", "\\u002d"),           # JSON-escaped on the wire
    json.dumps({"msg": f"k={KEY}"}, ensure_ascii=True),
    base64.b64encode(f"Authorization: Bearer {KEY}\r\n".encode()).decode(),
    base64.b64encode(f"xx{KEY}".encode()).decode(),             # every alignment
    f"<p>{''.join(f'&#x{ord(c):x};' for c in KEY)}</p>",
    KEY.swapcase(),
    KEY[:16] + "\n",                                             # cut (half the key and more)
])
def test_key_found_in_encodings_and_cuts(text: str) -> None:
    out = Redactor([KEY]).redact(text)
    assert "***" in out
    for probe in (KEY[:16], KEY[-16:], base64.b64encode(KEY.encode()).decode()[4:20]):
        assert probe.lower() not in out.lower()


def test_plain_text_is_left_alone() -> None:
    r = Redactor([KEY, "short"])  # a secret under 6 characters cannot be told from a word
    text = "The bearer of bad news said: Basic arithmetic, short and sweet (sk-proj-Zq)."
    assert r.redact(text) == text
    assert r.redact("Authorization: Bearer abcdef0123456789xyz") == "Authorization: Bearer ***"


def test_redact_url() -> None:
    assert redact_url("http://u:p@h:1/v1") == "http://h:1/v1"
    assert redact_url("http://KEY@h/v1") == "http://h/v1"
    assert redact_url("https://h/v1?key=a&api-version=2&access_token=b&sig=c") == \
        "https://h/v1?key=***&api-version=2&access_token=***&sig=***"
    assert redact_url("mock") == "mock"
    assert url_secrets("http://u:p%40ss@h/v1?token=t&x=1") == ["t", "p@ss"]
    assert url_secrets("http://KEY@h/v1") == ["KEY"]


def test_endpoint_auth() -> None:
    url, auth = endpoint_auth("http://u:p%40ss@h:8000/v1?key=q", None)
    assert url == "http://h:8000/v1/chat/completions?key=q"
    assert auth == "Basic " + base64.b64encode(b"u:p@ss").decode()
    assert endpoint_auth("http://h/v1", "sk") == ("http://h/v1/chat/completions", "Bearer sk")
    assert endpoint_auth("http://h/v1", "EMPTY")[1] == "Bearer EMPTY"  # as given (vLLM compares it)
    assert endpoint_auth("http://h/v1", "")[1] is None
    assert endpoint_auth("http://u:p@h/v1", "EMPTY")[1] == "Basic " + base64.b64encode(b"u:p").decode()
    with pytest.raises(ConfigError, match="give one of them"):
        endpoint_auth("http://u:p@h/v1", "sk")


@pytest.mark.parametrize(("url", "expected"), [
    ("http://h/v1?api-version=2", "http://h/v1/chat/completions?api-version=2"),
    ("http://h?key=1", "http://h/v1/chat/completions?key=1"),
    ("http://h/v1/chat/completions/?key=1", "http://h/v1/chat/completions?key=1"),
])
def test_normalise_url_keeps_the_query_last(url: str, expected: str) -> None:
    assert normalise_url(url) == expected


@pytest.mark.parametrize("kind", sorted(MALFORMED_BODIES))
def test_every_malformed_body_is_a_retryable_malformed_response(kind: str) -> None:
    with pytest.raises(RetryableError) as info:
        parse_completion(MALFORMED_BODIES[kind])
    assert info.value.kind == "malformed_response"
    assert str(info.value).startswith("malformed response: ")


def test_the_reply_contract_is_lax_where_the_api_is() -> None:
    lax = (b'{"choices": [{"message": {"content": ["a", {"type": "image_url"}, '
           b'{"type": "text", "text": "b"}], "reasoning": {"x": 1}, "extra": true}, '
           b'"finish_reason": null, "logprobs": NaN}], "usage": {"prompt_tokens": 3}, "model": null}')
    c = parse_completion(lax)
    assert (c.text, c.reasoning, c.finish_reason, c.model) == ("ab", None, None, "")
    assert (c.usage.prompt_tokens, c.usage.completion_tokens, c.usage.total_tokens) == (3, 0, 3)


SLASHED = "ak/Zq81rT5vLw0XbN3yHc7uPe2d/x+y"  # a key with the characters escapes treat apart


def _every_char(key: str, escape: str) -> str:
    return "".join(escape.format(ord(c)) for c in key)


@pytest.mark.parametrize("key", [KEY, SLASHED])
@pytest.mark.parametrize("encode", [
    pytest.param(lambda k: _every_char(k, "\\u{:04x}"), id="json-u-escapes"),
    pytest.param(lambda k: _every_char(k, "\\U{:04X}"), id="upper-U-escapes"),
    pytest.param(lambda k: _every_char(k, "\\x{:02x}"), id="x-escapes"),
    pytest.param(lambda k: _every_char(k, "\\X{:02X}"), id="upper-X-escapes"),
    pytest.param(lambda k: _every_char(k, "%{:02X}"), id="percent"),
    pytest.param(lambda k: k.replace("/", "\\/"), id="json-escaped-slash"),
    *(pytest.param(lambda k, o=o, alt=alt: (base64.urlsafe_b64encode if alt else base64.b64encode)(
        b"\0" * o + k.encode() + b"!").decode(), id=f"base64-offset-{o}{'-urlsafe' * alt}")
      for o in range(3) for alt in (False, True)),
])
def test_a_key_in_any_escape_or_base64_alignment_is_hidden(key: str, encode: object) -> None:
    """Every form a reply or a log may carry a key in, checked char by char (mutation
    testing found the upper-case escapes, the escaped slash and base64 at offset 0 untested)."""
    text = f"error: {encode(key)} was refused"  # type: ignore[operator]
    out = Redactor([key]).redact(text)
    assert out != text and "***" in out
    encoded = encode(key)  # type: ignore[operator]
    for cut in (encoded[: len(encoded) // 2], encoded[len(encoded) // 2:]):
        assert cut not in out


def test_every_occurrence_is_hidden_even_back_to_back() -> None:
    out = Redactor([KEY]).redact(f"{KEY}{KEY} and {KEY[:20]}{KEY}")
    assert KEY[:12] not in out and KEY[-12:] not in out
