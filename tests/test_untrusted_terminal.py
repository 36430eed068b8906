"""Terminal escapes in names from datasets and runs (issue 12, item 17): an OSC 52 clipboard
write, CSI sequences, ``\\r`` and a bidi override in a subset name, a category, a model name
and a bad record's message reach the terminal as visible escapes, in the table, the summary,
the log lines, ``report A B`` and one-line errors; the files keep the original values, and
the HTML pages escape them as HTML."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cli_support import run_cli

OSC52 = "\x1b]52;c;aGVsbG8=\x07"  # "write 'hello' to the clipboard"
SUBSET = f"sub{OSC52}<img src=x onerror=alert(1)>"
SHOWN = "sub\\x1b]52;c;aGVsbG8=\\x07<img src=x onerror=alert(1)>"  # SUBSET on the terminal
CATEGORY = "cat\x1b[2J\u202eevil\r<script>alert(1)</script>"
MODEL = "m\x1b[31m\x9b1m"
RAW = ("\x1b", "\x07", "\x9b", "\u202e", "\r")


def assert_shown_not_obeyed(text: str) -> None:
    for ch in RAW:
        assert ch not in text, (ch, text)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], list[str]]:
    """Two runs over a subset file named with an OSC 52 sequence (categories, a model name
    and a bad record with escapes too), with different simulated accuracy."""
    root = tmp_path_factory.mktemp("terminal")
    data = root / "data"
    data.mkdir()
    with (data / f"{SUBSET}.jsonl").open("w") as fh:
        for i, word in enumerate(("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")):
            fh.write(json.dumps({"messages": [{"role": "user", "content": f"Question {i}?"}],
                                 "answer": word, "category": CATEGORY}) + "\n")
        fh.write(json.dumps({"answer": "no messages"}) + "\n")
    outputs = []
    for accuracy in ("1.0", "0.0"):
        args = {"general_vqa": {"local_path": str(data)}}
        proc = run_cli("eval", "--eval-type", "mock", "--model", MODEL, "--datasets",
                       "general_vqa", "--dataset-args", json.dumps(args), "--sim-accuracy",
                       accuracy, "--work-dir", f"out{accuracy}", "--no-progress", cwd=root)
        assert proc.returncode == 0, proc.stderr
        outputs.append(proc.stdout + proc.stderr)
    run_dirs = [next((root / f"out{a}").iterdir()) for a in ("1.0", "0.0")]
    return root, run_dirs, outputs


def test_eval_table_summary_and_log_lines_show_escapes(runs) -> None:
    _, _, outputs = runs
    for output in outputs:
        assert_shown_not_obeyed(output)
        assert SHOWN in output and "\\x1b[2J\\u202eevil\\r" in output
        assert "m\\x1b[31m\\x9b1m" in output  # the model column
        assert f"{SHOWN}.jsonl:7: messages: missing" in output  # the bad record's log line


def test_report_a_b_shows_escapes(runs) -> None:
    root, run_dirs, _ = runs
    proc = run_cli("report", *map(str, run_dirs), "--out", "cmp.html", cwd=root)
    assert proc.returncode == 0, proc.stderr
    assert_shown_not_obeyed(proc.stdout + proc.stderr)
    assert SHOWN in proc.stdout
    assert f"{SHOWN}:1: [1] pass  [2] fail" in proc.stdout  # a disagreement
    single = run_cli("report", str(run_dirs[0]), cwd=root)
    assert single.returncode == 0, single.stderr
    assert_shown_not_obeyed(single.stdout + single.stderr)


def test_files_keep_the_original_values_and_html_escapes_them(runs) -> None:
    root, run_dirs, _ = runs
    (report,) = run_dirs[0].glob("reports/*/*.groundscope.json")
    rows = json.loads(report.read_text())["metrics"]
    assert {r["subset"] for r in rows} >= {SUBSET} and {r["category"] for r in rows} >= {CATEGORY}
    log = (run_dirs[0] / "logs" / "eval_log.log").read_text()
    assert OSC52 in log  # the log file is a file: original text
    html = (run_dirs[0] / "report.html").read_text()
    assert "<script>alert(1)" not in html and "<img src=x" not in html
    assert "\\u003cscript>alert(1)" in html  # in the page's JSON blob, where "<" is escaped
    html = (root / "cmp.html").read_text()
    assert "<img src=x" not in html and "&lt;img src=x onerror=alert(1)&gt;" in html


def test_one_line_errors_show_escapes(tmp_path: Path) -> None:
    args = {"general_vqa": {"local_path": f"nowhere{OSC52}\u202e"}}
    proc = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                   json.dumps(args), "--work-dir", "out", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("groundscope: error: ")
    assert_shown_not_obeyed(proc.stderr)
    assert "nowhere\\x1b]52;c;aGVsbG8=\\x07\\u202e" in proc.stderr


def test_visible_leaves_ordinary_text_alone() -> None:
    from groundscope.terminal import visible

    text = "ROUGE ↑ · L · Recall | 中文 | Ünïcödé | tab-free"
    assert visible(text) == text
    assert visible("a\tb\nc\x00d\x7fe\u2028f\u2066g") == "a\\tb\\nc\\x00d\\x7fe\\u2028f\\u2066g"
