"""Attack findings M2, L1, M5, M3, L2 (misc): secrets in generation configs, the media
host's reason phrase, link-local media addresses, a stray quote in a TSV, bidi controls in
the HTML report."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from aiohttp import web

from cli_support import EXAMPLES, run_cli
from groundscope.client.fetch import CheckedResolver, MediaFetcher, refused_address
from groundscope.client.openai import build_body
from groundscope.config import load_config
from groundscope.errors import ConfigError, MediaFetchError
from groundscope.simulator import SimulatorServer
from groundscope.types import MediaRef, Message, Modality, TextPart
from media_host import WAV

KEY = "sk-misc-ABCDEF0123456789SECRET"
JUDGE_KEY = "sk-judge-misc-0123456789abcdef"
HEADER_SECRET = "HDRSECRET999"
VQA = {"general_vqa": {"local_path": str(EXAMPLES / "vqa")}}


# ------------------------------------------------------------------ M2: generation_config secrets


def _secret_config() -> dict[str, object]:
    return {
        "eval_type": "mock", "datasets": ["general_vqa"], "dataset_args": VQA, "api_key": KEY,
        "generation_config": {
            "user": KEY, "max_tokens": 64, "stop_token_ids": [1, 2],
            "metadata": {"note": f"Basic {base64.b64encode(f'u:{KEY}'.encode()).decode()}",
                         "judge": JUDGE_KEY.upper()},
            "extra_body": {"X-Api-Key": HEADER_SECRET, "access_token": ["tok-one-value"]},
        },
        "judge": {"strategy": "llm", "models": {
            "model_id": "j", "api_url": "http://127.0.0.1:1/v1", "api_key": JUDGE_KEY,
            "generation_config": {"Authorization": "Bearer judge-header-secret", "seed": 3}}},
    }


def _assert_hidden(text: str) -> None:
    for secret in (KEY, JUDGE_KEY, HEADER_SECRET, "tok-one-value", "judge-header-secret"):
        assert secret.lower() not in text.lower(), secret
    assert base64.b64encode(f"u:{KEY}".encode()).decode() not in text


def test_redacted_config_masks_secret_keys_and_every_known_secret() -> None:
    cfg = load_config(_secret_config())
    data = cfg.redacted()
    _assert_hidden(json.dumps(data))
    gen = data["generation_config"]
    assert gen["extra_body"] == {"X-Api-Key": "***", "access_token": ["***"]}
    assert gen["user"] == "***" and gen["metadata"]["judge"] == "***"
    assert gen["max_tokens"] == 64 and gen["stop_token_ids"] == [1, 2]  # numbers stay
    judge_gen = data["judge"]["models"][0]["generation_config"]
    assert judge_gen == {"Authorization": "***", "seed": 3}
    # the values under secret-looking keys are known secrets: hidden in texts too
    assert {HEADER_SECRET, "tok-one-value", "Bearer judge-header-secret"} <= set(cfg.secrets())
    assert cfg.generation_config["user"] == KEY  # what is sent is unchanged


def test_no_secret_in_dry_run_config_json_task_config_or_report(tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text(json.dumps(_secret_config()))
    dry = run_cli("eval", "--config", str(path), "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stderr
    _assert_hidden(dry.stdout + dry.stderr)
    assert '"X-Api-Key": "***"' in dry.stdout
    live = _secret_config()  # the judge listening (a dead one now fails before the run)
    with SimulatorServer() as judge_url:
        live["judge"]["models"]["api_url"] = judge_url  # type: ignore[index]
        path.write_text(json.dumps(live))
        run = run_cli("eval", "--config", str(path), "--work-dir", str(tmp_path / "out"),
                      "--no-timestamp", "--no-progress", "--limit", "2", cwd=tmp_path)
    _assert_hidden(run.stdout + run.stderr)
    files = [p for p in (tmp_path / "out").rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.json", "task_config.yaml", "report.html"} <= names, (names, run.stderr)
    for p in files:
        _assert_hidden(p.read_text(errors="replace"))


def test_extra_headers_and_extra_query_are_refused_before_any_request(tmp_path: Path) -> None:
    for key in ("extra_headers", "extra_query"):
        gen = json.dumps({key: {"X-Api-Key": HEADER_SECRET}})
        proc = run_cli("eval", "--model", "m", "--api-url", "http://127.0.0.1:1/v1",
                       "--api-key", KEY, "--datasets", "general_vqa",
                       "--generation-config", gen, "--dry-run", cwd=tmp_path)
        assert proc.returncode == 2
        assert proc.stderr.strip().splitlines() == [
            f"groundscope: error: generation_config: {key} is not supported (it is an HTTP "
            "request option, not a generation setting); give the endpoint's key as api_key "
            "and its query in api_url"]
        _assert_hidden(proc.stdout + proc.stderr)
    with pytest.raises(ConfigError, match=r"judge.*extra_headers is not supported"):
        load_config({**_secret_config(), "judge": {"strategy": "llm", "models": {
            "model_id": "j", "api_url": "http://127.0.0.1:1/v1",
            "generation_config": {"extra_headers": {"A": "b"}}}}})


def test_extra_body_is_merged_into_the_chat_body() -> None:
    body = build_body((Message("user", (TextPart("hi"),)),), "m",
                      {"max_tokens": 5, "extra_body": {"top_k": 20, "model": "other"}})
    assert "extra_body" not in body
    assert body["top_k"] == 20 and body["model"] == "m" and body["max_tokens"] == 5


# ------------------------------------------------------------------ L1 + M5: the media fetcher

PASSWORD = "AUDIOPW1234567"


@pytest.fixture
async def reason_host() -> AsyncIterator[int]:
    async def forbidden(request: web.Request) -> web.Response:
        return web.Response(status=403, reason=f"Forbidden for alice:{PASSWORD} " + "x" * 900)

    async def ok(request: web.Request) -> web.Response:
        return web.Response(body=WAV, content_type="audio/wav")

    app = web.Application()
    app.router.add_get("/secret.wav", forbidden)
    app.router.add_get("/tone.wav", ok)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        yield runner.addresses[0][1]
    finally:
        await runner.cleanup()


async def _fetch(url: str) -> bytes:
    fetcher = MediaFetcher(timeout=5)
    try:
        return await fetcher.fetch(MediaRef(Modality.AUDIO, url))
    finally:
        await fetcher.aclose()


async def test_the_reason_phrase_is_redacted_and_bounded(reason_host: int) -> None:
    with pytest.raises(MediaFetchError) as info:
        await _fetch(f"http://alice:{PASSWORD}@127.0.0.1:{reason_host}/secret.wav")
    text = str(info.value)
    assert PASSWORD not in text
    assert text.startswith(f"audio URL http://127.0.0.1:{reason_host}/secret.wav: HTTP 403 "
                           "Forbidden for alice:***")
    assert len(text) <= 500


async def test_unspecified_link_local_multicast_reserved_addresses_are_refused(
        reason_host: int) -> None:
    assert await _fetch(f"http://127.0.0.1:{reason_host}/tone.wav") == WAV  # loopback: allowed
    assert await _fetch(f"http://localhost:{reason_host}/tone.wav") == WAV
    with pytest.raises(MediaFetchError, match=r"refused: 0\.0\.0\.0 is an unspecified address"):
        await _fetch(f"http://0.0.0.0:{reason_host}/tone.wav")  # would reach loopback


@pytest.mark.parametrize(("address", "why"), [
    ("169.254.169.254", "a link-local"), ("fe80::1", "a link-local"),
    ("::ffff:169.254.169.254", "a link-local"), ("224.0.0.1", "a multicast"),
    ("ff02::1", "a multicast"), ("0.0.0.0", "an unspecified"), ("::", "an unspecified"),
    ("240.0.0.1", "a reserved"), ("255.255.255.255", "a reserved")])
def test_refused_addresses(address: str, why: str) -> None:
    assert refused_address(address) == f"{refused_address(address).split()[0]} is {why} address"


@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "10.0.0.1", "192.168.1.2",
                                     "172.16.0.1", "93.184.216.34", "2001:db8::1"])
def test_loopback_private_and_public_addresses_are_allowed(address: str) -> None:
    assert refused_address(address) is None


async def test_the_resolver_refuses_a_name_resolving_to_a_refused_address() -> None:
    resolver = CheckedResolver()
    try:
        assert [r["host"] for r in await resolver.resolve("127.0.0.1", 80)] == ["127.0.0.1"]
        with pytest.raises(MediaFetchError,
                           match=r"host '169\.254\.169\.254': refused: 169\.254\.169\.254 is a link"):
            await resolver.resolve("169.254.169.254", 80)  # getaddrinfo of a literal: no network
    finally:
        await resolver.close()


# ------------------------------------------------------------------ M3: a stray quote in TSV / CSV


def _read(path: Path) -> tuple[dict[int, dict[str, object]], dict[int, str]]:
    from groundscope.dataset.readers import iter_records

    good: dict[int, dict[str, object]] = {}
    bad: dict[int, str] = {}
    for origin, record in iter_records(path):
        if isinstance(record, dict):
            good[origin.line] = record
        else:
            bad[origin.line] = str(record)
    return good, bad


def test_a_stray_quote_in_a_tsv_costs_one_row(tmp_path: Path) -> None:
    path = tmp_path / "t.tsv"
    rows = [f"{i}\tq{i}\ta{i}" for i in range(1, 1001)]
    rows[1] = '2\t"q2 unbalanced\ta2'
    path.write_text("index\tquestion\tanswer\n" + "\n".join(rows) + "\n")
    good, bad = _read(path)
    assert bad == {3: f"{path}:3: <row>: an unclosed quote at line 3 swallowed lines 3..103; "
                      "the row is skipped and reading resumes at line 4"}
    assert len(good) == 999 and good[4] == {"index": "3", "question": "q3", "answer": "a3"}
    assert good[1001] == {"index": "1000", "question": "q1000", "answer": "a1000"}


def test_a_stray_quote_near_the_end_of_a_csv_is_reported_and_the_rest_kept(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text('id,question\n1,q1\n2,"q2\n3,q3\n4,q4\n')
    good, bad = _read(path)
    assert bad == {3: f"{path}:3: <row>: an unclosed quote at line 3 swallowed lines 3..5 "
                      "(the end of the file); the row is skipped and reading resumes at line 4"}
    assert good == {2: {"id": "1", "question": "q1"}, 4: {"id": "3", "question": "q3"},
                    5: {"id": "4", "question": "q4"}}


def test_quoted_cells_spanning_up_to_max_row_lines_stay_one_record(tmp_path: Path) -> None:
    from groundscope.dataset.readers import MAX_ROW_LINES

    long_cell = "\n".join(f"l{i}" for i in range(MAX_ROW_LINES))  # exactly MAX_ROW_LINES lines
    too_long = "\n".join(f"m{i}" for i in range(MAX_ROW_LINES + 1))
    path = tmp_path / "t.csv"
    path.write_text(f'id,question\n1,"two\nlines"\n2,"{long_cell}"\n3,"{too_long}"\n4,q4\n')
    good, bad = _read(path)
    assert good[2] == {"id": "1", "question": "two\nlines"}
    assert good[4] == {"id": "2", "question": long_cell}
    start = 4 + MAX_ROW_LINES
    assert list(bad) == [start] and "an unclosed quote" in bad[start]
    # the rest of the over-long cell is read again as rows; the row after it is kept
    assert good[start + MAX_ROW_LINES + 1] == {"id": "4", "question": "q4"}


# ------------------------------------------------------------------ L2: bidi controls in report.html

BIDI = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069"]


def test_bidi_controls_never_reach_report_html_raw(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    subset = "evil\u202egpj.exe"
    rows = [{"id": f"id\u202e{i}", "category": f"cat\u2066{i}\u2069",
             "messages": [{"role": "user", "content": f"Question {i} \u202dreversed\u202c"}],
             "answer": f"answer\u202b{i}"} for i in range(3)]
    (data / f"{subset}.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    proc = run_cli("eval", "--eval-type", "mock", "--model", "m\u202eodel", "--datasets",
                   "general_vqa", "--dataset-args", json.dumps(
                       {"general_vqa": {"local_path": str(data), "subset_list": [subset]}}),
                   "--work-dir", str(tmp_path / "out"), "--no-timestamp", "--no-progress",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    html = next((tmp_path / "out").rglob("report.html")).read_text(encoding="utf-8")
    assert [ch for ch in BIDI if ch in html] == []
    assert "evil\\u202egpj.exe" in html  # the subset name, shown as an escape
    assert "m\\u202eodel" in html
    assert "unicode-bidi: isolate" in html


def test_visible_bidi_and_the_data_blob() -> None:
    from groundscope.report.page import json_blob, visible_bidi

    assert visible_bidi("a\u202eb\u2068c\u200fd") == "a\\u202eb\\u2068c\u200fd"  # marks stay
    blob = json_blob({"id\u202e": "x\u2067y"})
    inner = blob.split(">", 1)[1].rsplit("<", 1)[0]
    assert json.loads(inner) == {"id\\u202e": "x\\u2067y"}  # the page's script shows the escape


async def test_a_name_resolving_to_a_refused_address_fails_the_fetch(
        reason_host: int, monkeypatch: pytest.MonkeyPatch) -> None:
    from groundscope.client import fetch

    real = fetch.refused_address
    monkeypatch.setattr(fetch, "refused_address",  # as if loopback were link-local
                        lambda a: "127.0.0.1 is a link-local address" if a == "127.0.0.1" else real(a))
    with pytest.raises(MediaFetchError) as info:
        await _fetch(f"http://localhost:{reason_host}/tone.wav")
    assert "audio URL host 'localhost': refused: 127.0.0.1 is a link-local address" in str(info.value)
