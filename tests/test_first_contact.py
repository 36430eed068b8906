"""The first hour of a new user (issue 22, section 2): a wrong endpoint, a mistyped flag, a
dry run without keys, Ctrl-C and a skipped record each say what happened, in one place."""

from __future__ import annotations

import pytest

from groundscope.cli import main


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
