"""Untrusted Anthropic Messages and OpenAI Responses endpoints: every broken 200 body is a
retryable ``malformed_response`` (never a crash, never a wrong answer), and a key sent as
``x-api-key`` that the server echoes back, in any form, is written nowhere."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from groundscope.client import anthropic, responses
from groundscope.errors import RetryableError
from groundscope.simulator import SimBehaviour, SimulatorServer
from groundscope.simulator.faults import echo_forms
from reliability_support import eval_args, rows, run_cli, samples_of, write_dataset

_MSG = b'"type": "message", "role": "assistant", "model": "m", "stop_reason": "end_turn"'
MESSAGES_BODIES: dict[str, bytes] = {
    "not_json": b"<html>502 Bad Gateway</html>",
    "truncated": b'{"type": "message", "content": [{"type": "te',
    "not_object": b'["content"]',
    "no_content": b"{" + _MSG + b"}",
    "content_null": b"{" + _MSG + b', "content": null}',
    "content_string": b"{" + _MSG + b', "content": "hi"}',
    "block_not_object": b"{" + _MSG + b', "content": ["hi"]}',
    "block_without_type": b"{" + _MSG + b', "content": [{"text": "hi"}]}',
    "text_number": b"{" + _MSG + b', "content": [{"type": "text", "text": 7}]}',
    "thinking_list": b"{" + _MSG + b', "content": [{"type": "thinking", "thinking": ["a"]}]}',
    "stop_reason_number": b'{"type": "message", "content": [], "stop_reason": 3}',
    "usage_string": b"{" + _MSG + b', "content": [], "usage": {"input_tokens": "9"}}',
    "usage_negative": b"{" + _MSG + b', "content": [], "usage": {"output_tokens": -1}}',
    "usage_huge": b"{" + _MSG + b', "content": [], "usage": {"cache_read_input_tokens": 1e40}}',
    "nan": b'{"type": "message", "content": [{"type": "text", "text": NaN}]}',
    "deep": b"{" + _MSG + b', "content": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
}
_RESP = b'"object": "response", "status": "completed", "model": "m"'
RESPONSES_BODIES: dict[str, bytes] = {
    "not_json": b"<html>502 Bad Gateway</html>",
    "truncated": b'{"object": "response", "output": [{"type": "mes',
    "not_object": b'["output"]',
    "no_output": b"{" + _RESP + b"}",
    "output_object": b"{" + _RESP + b', "output": {"type": "message"}}',
    "item_not_object": b"{" + _RESP + b', "output": ["hi"]}',
    "item_without_type": b"{" + _RESP + b', "output": [{"content": []}]}',
    "content_string": b"{" + _RESP + b', "output": [{"type": "message", "content": "hi"}]}',
    "text_number": b"{" + _RESP + b', "output": [{"type": "message", "content": '
                                  b'[{"type": "output_text", "text": 7}]}]}',
    "status_number": b'{"status": 1, "output": []}',
    "usage_float": b"{" + _RESP + b', "output": [], "usage": {"output_tokens": 1.5}}',
    "usage_huge": b"{" + _RESP + b', "output": [], "usage": {"total_tokens": 1e40}}',
    "deep": b"{" + _RESP + b', "output": [], "x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
}


@pytest.mark.parametrize("kind", sorted(MESSAGES_BODIES))
def test_every_broken_messages_body_is_a_malformed_response(kind: str) -> None:
    with pytest.raises(RetryableError) as err:
        anthropic.parse_reply(MESSAGES_BODIES[kind])
    assert err.value.kind == "malformed_response" and err.value.status == 200


@pytest.mark.parametrize("kind", sorted(RESPONSES_BODIES))
def test_every_broken_responses_body_is_a_malformed_response(kind: str) -> None:
    with pytest.raises(RetryableError) as err:
        responses.parse_reply(RESPONSES_BODIES[kind])
    assert err.value.kind == "malformed_response" and err.value.status == 200


KEY = "sk-ant-SECRET-4c8e2a6f0b1d3957cc"


@pytest.mark.parametrize("echo", ["error", "reply"])
def test_an_echoed_x_api_key_is_written_nowhere(echo: str, tmp_path: Path) -> None:
    """The Messages endpoint echoes the x-api-key it got (in a 401, or in the answer, its
    thinking and its model name) in every form: outputs, log, page and terminal hide it."""
    data = write_dataset(tmp_path, per_subset=2)
    server = SimulatorServer(samples_of(data), SimBehaviour(echo_key=echo))
    with server as url:
        run = tmp_path / "run"
        proc = run_cli(eval_args(url, data, run, "--eval-type", "anthropic_api", "--api-key",
                                 "$GS_ANT_KEY", "--debug", "--ignore-errors"),
                       cwd=tmp_path, GS_ANT_KEY=KEY)
    assert proc.returncode == (1 if echo == "error" else 0), proc.stderr  # 1: all got a 401
    assert {r["path"] for r in server.requests()} == {"/v1/messages"}
    preds = rows(run, "predictions")
    assert len(preds) == 4
    if echo == "error":
        assert all(p["error_kind"] == "http_401" for p in preds)
    else:
        assert all(p["status"] == "ok" and "| *** | ***" in p["prediction"] for p in preds)
        assert all(p["reasoning"].startswith("you sent | ***") for p in preds)
    texts = [proc.stdout, proc.stderr]
    texts += [p.read_bytes().decode("utf-8", "replace") for p in run.rglob("*") if p.is_file()]
    forms = [f.strip(".\u2026") for f in echo_forms(KEY) if not f.startswith("Bearer ")]
    for text in texts:
        for view in (text, html.unescape(text), text.replace("\\\\", "\\")):
            assert KEY.lower() not in view.lower()
            assert not [f for f in forms if f in view]
