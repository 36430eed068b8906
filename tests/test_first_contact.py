"""The first hour of a new user (issue 22, section 2): a wrong endpoint, a mistyped flag, a
dry run without keys, Ctrl-C and a skipped record each say what happened, in one place."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli_support import EXAMPLES
from groundscope.cli import main
from groundscope.simulator import SimulatorServer


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
