"""The first hour of a new user (issue 22, section 2): a wrong endpoint, a mistyped flag, a
dry run without keys, Ctrl-C and a skipped record each say what happened, in one place."""

from __future__ import annotations

import json
import shlex
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import EXAMPLES
from groundscope.cli import main
from groundscope.simulator import SimBehaviour, SimulatorServer


def test_a_mistyped_flag_gets_a_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, hint in ((["eval", "--modle", "x"], "did you mean --model?"),
                       (["eval", "--api_url=http://h/v1"], "did you mean --api-url?"),
                       (["report", "run", "--sed", "1"], "did you mean --seed?"),
                       (["--vresion"], "did you mean --version?")):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("groundscope: error: unrecognized arguments:") and err.endswith(f"({hint})")
        assert "\n" not in err
    with pytest.raises(SystemExit):
        main(["eval", "--xyzzy"])
    assert "did you mean" not in capsys.readouterr().err  # nothing close: no guess


ARGS = '{"general_vqa": {"local_path": "%s"}}' % (EXAMPLES / "vqa")


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound but not listening: a connection to it is refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        yield sock.getsockname()[1]


def _eval(capsys: pytest.CaptureFixture[str], work: Path, *flags: str) -> tuple[int, str]:
    code = main(["eval", "--datasets", "general_vqa", "--dataset-args", ARGS,
                 "--work-dir", str(work), "--no-progress", *flags])
    return code, capsys.readouterr().err


def test_nothing_listening_fails_at_once_naming_host_port_without_a_run_dir(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, closed_port: int) -> None:
    code, err = _eval(capsys, tmp_path, "--model", "m",
                      "--api-url", f"http://127.0.0.1:{closed_port}/v1")
    assert code == 2
    assert err.strip() == (f"groundscope: error: api_url: cannot reach 127.0.0.1:{closed_port} "
                           f"(http://127.0.0.1:{closed_port}/v1): connection refused: nothing is "
                           f"listening on port {closed_port} (is the server up, the port right?)")
    assert not tmp_path.exists() or not any(tmp_path.iterdir())
    judge = '{"strategy": "llm", "models": {"model_id": "j", "api_url": "http://127.0.0.1:%d/v1"}}'
    code, err = _eval(capsys, tmp_path, "--eval-type", "mock", "--judge", judge % closed_port)
    assert code == 2 and f"judge.models[0].api_url: cannot reach 127.0.0.1:{closed_port}" in err
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_dns_and_tls_failures_say_which(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, err = _eval(capsys, tmp_path, "--model", "m", "--api-url", "http://no-such-host.invalid/v1")
    assert code == 2 and "cannot reach no-such-host.invalid:80" in err and ": DNS: " in err
    with SimulatorServer() as url:  # plain http, asked for https
        code, err = _eval(capsys, tmp_path, "--model", "m", "--api-url",
                          url.replace("http://", "https://"))
    assert code == 2 and ": TLS handshake failed" in err and "\n" not in err.strip()
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def _last_line(err: str) -> str:
    return err.strip().splitlines()[-1]


def test_a_404_names_the_url_posted_to_and_suggests_the_v1_base(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    with SimulatorServer() as url:
        root = url.removesuffix("/v1")
        code, err = _eval(capsys, tmp_path, "--model", "m", "--api-url", f"{root}/api")
    assert code == 1
    assert (f"HTTP 404: 404: Not Found (POST {root}/api/chat/completions: no such route; "
            f"OpenAI-compatible servers serve under /v1: try --api-url {root}/v1)") in _last_line(err)


def test_an_unknown_model_lists_what_v1_models_offers(capsys: pytest.CaptureFixture[str],
                                                      tmp_path: Path) -> None:
    with SimulatorServer(behaviour=SimBehaviour(models=("vl-large", "vl-small"),
                                                gateway="litellm")) as url:  # LiteLLM's 400
        code, err = _eval(capsys, tmp_path, "--model", "vl-larg", "--api-url", url,
                          "--eval-batch-size", "4")
    assert code == 1
    assert (f"(POST {url}/chat/completions: model 'vl-larg' is not served there; /v1/models "
            "offers: vl-large, vl-small)") in _last_line(err)
    failed = [line for line in err.splitlines() if "failed: HTTP 400" in line]
    assert failed and all("offers: vl-large, vl-small" in line for line in failed)  # each one


def test_a_401_names_where_the_key_came_from_never_its_value(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    secret = "sk-first-hour-0123456789"
    monkeypatch.setenv("GS_FIRST_KEY", secret)
    with SimulatorServer(behaviour=SimBehaviour(echo_key="error")) as url:  # echoes the key back
        code, err = _eval(capsys, tmp_path, "--model", "m", "--api-url", url,
                          "--api-key", "$GS_FIRST_KEY")
        assert code == 1 and secret not in err
        assert f"(POST {url}/chat/completions: the key was rejected; it came from $GS_FIRST_KEY)" \
            in _last_line(err)
        code, err = _eval(capsys, tmp_path, "--model", "m", "--api-url", url, "--api-key", secret)
        assert code == 1 and secret not in err
        assert "the key was rejected; it came from --api-key)" in _last_line(err)
        config = tmp_path / "task.yaml"
        config.write_text(f"api_key: {secret}\n")
        code, err = _eval(capsys, tmp_path, "--config", str(config), "--model", "m",
                          "--api-url", url)
        assert code == 1 and secret not in err
        assert f"it came from api_key in {config})" in _last_line(err)


def test_dry_run_estimates_without_the_keys_and_names_every_unset_variable(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GS_UNSET_MODEL_KEY", "GS_UNSET_JUDGE_KEY"):
        monkeypatch.delenv(name, raising=False)
    judge = ('{"strategy": "llm", "models": {"model_id": "j", "api_url": "http://127.0.0.1:9/v1", '
             '"api_key": "$GS_UNSET_JUDGE_KEY"}}')
    flags = ("--model", "m", "--api-url", "http://127.0.0.1:9/v1", "--api-key",
             "$GS_UNSET_MODEL_KEY", "--judge", judge)
    code = main(["eval", "--datasets", "general_vqa", "--dataset-args", ARGS, *flags,
                 "--dry-run", "--json"])
    out, err = capsys.readouterr()
    assert code == 0
    estimate = json.loads(out)
    assert estimate["config"]["api_key"] == "$GS_UNSET_MODEL_KEY"
    assert estimate["estimate"]["datasets"]  # estimated all the same
    assert err.strip() == ("groundscope: note: not set here (a run needs them): "
                           "GS_UNSET_MODEL_KEY, GS_UNSET_JUDGE_KEY")
    code, err = _eval(capsys, tmp_path, *flags)  # a run: both named at once, nothing written
    assert code == 2 and err.strip() == ("groundscope: error: api_key: environment variables "
                                         "GS_UNSET_MODEL_KEY, GS_UNSET_JUDGE_KEY are not set")
    assert not tmp_path.exists() or not any(tmp_path.iterdir())


def test_ctrl_c_prints_the_whole_command_that_resumes_with_keys_as_names(tmp_path: Path) -> None:
    secret, judge_secret = "sk-interrupt-0123456789", "sk-judge-interrupt-9876543210"
    with SimulatorServer(behaviour=SimBehaviour(latency_ms=30_000)) as url:  # never answers in time
        judge = json.dumps({"strategy": "llm", "models": {"model_id": "j", "api_url": url,
                                                          "api_key": judge_secret}})
        argv = ["eval", "--model", "m", "--api-url", url, "--api-key", secret, "--judge", judge,
                "--datasets", "general_vqa", "--dataset-args", ARGS, "--work-dir",
                str(tmp_path / "out"), "--no-progress", "--ignore-errors"]
        proc = subprocess.Popen([sys.executable, "-m", "groundscope", *argv], cwd=tmp_path,
                                stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:  # the run has started once it names its directory
            if "run directory:" in line:
                run_dir = line.rsplit("run directory: ", 1)[1].strip()
                break
        proc.send_signal(signal.SIGINT)
        err = proc.stderr.read()
        assert proc.wait(timeout=60) == 130
    assert secret not in err and judge_secret not in err
    command = err.strip().splitlines()[-1].strip()
    resumed = shlex.split(command)
    assert resumed[:2] == ["groundscope", "eval"] and resumed[-2:] == ["--use-cache", run_dir]
    assert resumed[resumed.index("--api-key") + 1] == "$API_KEY"
    assert json.loads(resumed[resumed.index("--judge") + 1])["models"]["api_key"] == "***"
    assert resumed[resumed.index("--dataset-args") + 1] == ARGS  # every other flag as given
    assert "--ignore-errors" in resumed and resumed.count("--use-cache") == 1


def _with_missing_image(root: Path, png: Path) -> str:
    """A one-subset VQA dataset whose second record names an image that is not there."""
    data = root / "data"
    data.mkdir()
    (data / "dot.png").write_bytes(png.read_bytes())

    def line(image: str) -> str:
        return json.dumps({"messages": [{"role": "user", "content": [
            {"type": "text", "text": "What is it?"},
            {"type": "image_url", "image_url": {"url": image}}]}], "answer": "dot"})

    (data / "alpha.jsonl").write_text("\n".join([line("dot.png"), line("gone.png"),
                                                 line("dot.png")]) + "\n")
    return json.dumps({"general_vqa": {"local_path": str(data)}})


def test_a_skipped_record_is_said_at_the_end_with_its_file_and_line(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, png: Path) -> None:
    args = _with_missing_image(tmp_path, png)
    code = main(["eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                 args, "--work-dir", str(tmp_path / "out"), "--no-timestamp", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0 and "skipped 1 bad record" in out  # the summary line counts it too
    closing = err.strip().splitlines()[-1]  # after the table and the summary, not mid-log
    assert closing.startswith("groundscope: warning: general_vqa: 1 bad record skipped, not "
                              f"evaluated; the first: {tmp_path / 'data' / 'alpha.jsonl'}:2: ")
    assert "gone.png" in closing and closing.endswith(f"(all in {tmp_path / 'out' / 'skipped.jsonl'})")


def test_strict_leaves_no_run_directory_behind(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                               png: Path) -> None:
    args = _with_missing_image(tmp_path, png)
    code = main(["eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                 args, "--work-dir", str(tmp_path / "out"), "--no-progress", "--strict"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.startswith(f"groundscope: error: {tmp_path / 'data' / 'alpha.jsonl'}:2:")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_score_with_an_unreachable_judge_fails_before_scoring(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, closed_port: int) -> None:
    code, _ = _eval(capsys, tmp_path, "--eval-type", "mock", "--no-timestamp", "--limit", "2")
    assert code == 0
    reviews = sorted((tmp_path / "reviews").rglob("*.jsonl"))
    before = [p.read_bytes() for p in reviews]
    judge = '{"strategy": "llm", "models": {"model_id": "j", "api_url": "http://127.0.0.1:%d/v1"}}'
    code = main(["score", str(tmp_path), "--judge", judge % closed_port])
    err = capsys.readouterr().err
    assert code == 2 and err.strip().startswith(
        f"groundscope: error: judge.models[0].api_url: cannot reach 127.0.0.1:{closed_port}")
    assert [p.read_bytes() for p in reviews] == before  # nothing scored, nothing rewritten


def test_the_pre_flight_tries_every_address_a_name_resolves_to(monkeypatch: pytest.MonkeyPatch) -> None:
    """A name resolving to ::1 first and 127.0.0.1 second (``localhost`` on many systems),
    with a server on 127.0.0.1 only, is reachable, as the client's connector finds it: the
    pre-flight tried the first address alone and stopped such a run before it started."""
    import socket

    from groundscope.client.reach import check_reachable
    from groundscope.errors import ConfigError

    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    real = socket.getaddrinfo

    def both(host: str, *args: object, **kw: object) -> list:
        if host != "dual.test":
            return real(host, *args, **kw)
        v6 = (socket.AF_INET6, socket.SOCK_STREAM, 6, "", ("::1", port, 0, 0))
        v4 = (socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", port))
        return [v6, v4]

    monkeypatch.setattr(socket, "getaddrinfo", both)
    with server:
        check_reachable(f"http://dual.test:{port}/v1", "api_url")  # no error
    with pytest.raises(ConfigError, match=r"dual\.test:\d+ .*connection refused"):
        check_reachable(f"http://dual.test:{port}/v1", "api_url")
