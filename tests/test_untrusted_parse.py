"""Hostile input to the parsers (issue 12): dataset files with bad bytes (item 8) and texts
built to make parsing quadratic (item 12).

Item 8: the corpus of ``tests/untrusted/parse/make_corpus.py`` runs through the CLI; every
bad row is one skipped record naming its physical (first) line and field, and the run
finishes with its report.

Item 12, how work is measured. Wall time is not used. What a test can count exactly:

- Python-level work: :func:`python_lines` counts the line events of groundscope's own code
  (``sys.settrace``) while a parser runs. Each parser runs on a hostile text of n and of 4n
  characters and must do at most ~4x the work (``assert_linear``); a quadratic loop does 16x.
- Memory: ``tracemalloc``'s peak, the same way (ROUGE-L's masks were quadratic in memory).
- Work inside C (a regex or a slice) cannot be counted. There the guard is structural: the
  patterns that rescanned the rest of the text from every position are gone, and every
  pattern of the parsing modules is in a reviewed list with the reason it is linear
  (``test_every_parsing_regex_is_reviewed``). End to end, the issue's answers and judge
  replies go through the CLI and the loopback simulator under a hard ceiling of CPU
  seconds for the whole process (``RLIMIT_CPU``, the kernel stops it): far above what the
  linear code needs (~3 s), far below what the quadratic code took (minutes).
"""

from __future__ import annotations

import importlib.util
import json
import random
import re
import resource
import subprocess
import sys
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import groundscope
from cli_support import ROOT, run_cli
from groundscope.client.sim_wire import SimReply, SimRequest
from groundscope.client.simulator import SimulatorServer
from groundscope.dataset.readers import count_records, iter_records
from groundscope.errors import RecordError
from groundscope.scoring import choice, json_reply, normalise
from groundscope.scoring.grounding_prompt import quoted
from groundscope.scoring.judge_prompt import JUDGE_MARKER, parse_verdict, split_prompt

SRC = str(Path(groundscope.__file__).parent)  # the code under test, wherever it is installed
CORPUS = ROOT / "tests" / "untrusted" / "parse" / "make_corpus.py"


def _corpus_module() -> Any:
    spec = importlib.util.spec_from_file_location("make_corpus", CORPUS)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list]]:
    return _corpus_module().write_corpus(tmp_path_factory.mktemp("corpus"))


def _eval(folder: Path, cwd: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    args = {"general_vqa": {"local_path": str(folder)}}
    return run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                   json.dumps(args), "--work-dir", "out", "--no-progress", *extra, cwd=cwd)


# --- item 8: bad bytes are bad records -----------------------------------------------------


@pytest.mark.parametrize("case", ["tsv", "csv", "parquet_values", "parquet_group"])
def test_bad_bytes_are_skipped_records_with_line_and_field(corpus, case: str, tmp_path: Path
                                                           ) -> None:
    folder, expected = corpus[case]
    proc = _eval(folder, tmp_path, "--max-record-bytes", "4096")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    (run_dir,) = (tmp_path / "out").iterdir()
    assert (run_dir / "report.html").is_file() and list(run_dir.glob("reports/*/*.json"))
    rows = [json.loads(line) for line in (run_dir / "skipped.jsonl").read_text().splitlines()]
    got = {}
    for row in rows:  # "file:line: field: problem"
        found = re.fullmatch(r"(.+?):(\d+): (.+?): (.*)", row["problem"])
        assert found is not None, row
        where, line, field, problem = found.groups()
        got[(Path(where).name, int(line), field)] = problem
        assert where == str(folder / Path(where).name)
    assert sorted(got) == sorted((name, line, field) for name, line, field, _ in expected)
    for name, line, field, phrase in expected:
        assert phrase in got[(name, line, field)], got
    n = len(expected)
    assert re.search(rf"skipped {n} bad records?\b", proc.stdout)


def test_good_rows_around_the_bad_ones_are_read_as_written(corpus) -> None:
    folder, _ = corpus["tsv"]
    items = list(iter_records(folder / "rows.tsv", max_record_bytes=4096))
    good = {o.line: r for o, r in items if not isinstance(r, RecordError)}
    assert sorted(good) == [2, 3, 6, 10, 15, 16]  # CRLF, a cell over 2 lines, a lone CR
    assert good[3]["answer"] == "three\nlines" and good[6]["answer"] == "Six"
    assert "answer" not in good[15]  # a short row: the missing cell is absent
    assert count_records(folder / "rows.tsv", max_record_bytes=4096) == len(items) == 12


def test_corrupt_parquet_footer_is_one_line_before_any_request(corpus, tmp_path: Path) -> None:
    folder, _ = corpus["parquet_footer"]
    proc = _eval(folder, tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith(f"groundscope: error: {folder / 'cut.parquet'}: cannot read parquet")
    assert not (tmp_path / "out").exists()


def test_unreadable_header_is_one_line_before_any_request(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "h.tsv").write_bytes(b"messages\tans\xffwer\n[]\tx\n")
    proc = _eval(tmp_path / "data", tmp_path)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr == (f"groundscope: error: {tmp_path / 'data' / 'h.tsv'}:1: header row: "
                           "column 2: not valid UTF-8 (byte 0xff at character 4)\n")


def test_a_long_line_is_skipped_without_being_held(tmp_path: Path) -> None:
    """A 16 MB line over a 64 KiB bound is read past in chunks: memory stays ~ the bound."""
    for name, header in (("d.jsonl", b""), ("d.tsv", b"messages\tanswer\n")):
        path = tmp_path / name
        with path.open("wb") as fh:
            fh.write(header + b'{"a": "' + b"x" * (16 << 20) + b'"}\n{"a": 1}\n')
        tracemalloc.start()
        try:
            items = list(iter_records(path, max_record_bytes=64 << 10))
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert peak < 2 << 20, (name, peak)
        first, second = items
        assert isinstance(first[1], RecordError) and "longer than 65,536 bytes" in str(first[1])
        assert first[0].line == (1 if name.endswith("jsonl") else 2)
        assert second[0].line == first[0].line + 1


def test_line_ends_bom_and_quotes_at_the_edges(tmp_path: Path) -> None:
    path = tmp_path / "cr.csv"  # old Mac line ends, a BOM, an unterminated quote at the end
    path.write_bytes(b'\xef\xbb\xbfa,b\r1,2\r\r3,"x\ry"\r4,"open\r')
    items = list(iter_records(path))
    assert [(o.line, r) for o, r in items] == [
        (2, {"a": "1", "b": "2"}), (4, {"a": "3", "b": "x\ry"}), (6, {"a": "4", "b": "open\r"})]
    jsonl = tmp_path / "bad.jsonl"
    jsonl.write_bytes(b'{"a": 1}\r\n{"a": "\xff"}\n\x00\n{"a": 2}')
    lines = [(o.line, isinstance(r, RecordError)) for o, r in iter_records(jsonl)]
    assert lines == [(1, False), (2, True), (3, True), (4, False)]


def test_rows_framed_from_bytes_read_as_the_csv_module_reads_text(monkeypatch, tmp_path: Path
                                                                  ) -> None:
    """Random well-formed UTF-8 files with every line end and quoted line breaks, read in
    chunks of 1..5 bytes (so a CRLF or a character falls across chunks): the same records
    and start lines as ``csv.reader`` over the decoded text."""
    import csv
    import io

    from groundscope.dataset import readers

    rng = random.Random(8)
    pieces = ["a", "é", ",", '"', "\n", "\r", "\r\n", " ", '""']
    path = tmp_path / "t.csv"
    for trial in range(3000):
        monkeypatch.setattr(readers, "_CHUNK", 1 + trial % 5)
        text = "h1,h2\n" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        reader = csv.reader(io.StringIO(text, newline=""))
        header = next(reader)
        expected, end = [], reader.line_num
        for cells in reader:
            start, end = end + 1, reader.line_num
            if any(c.strip() for c in cells) and len(cells) <= len(header):
                expected.append((start, {k: v for k, v in zip(header, cells, strict=False) if v}))
        path.write_bytes(text.encode())
        got = [(o.line, r) for o, r in iter_records(path) if not isinstance(r, RecordError)]
        assert got == expected, text


# --- item 12: work is linear in the size of a hostile text ---------------------------------


def python_lines(fn: Callable[[str], Any], text: str) -> int:
    """Line events executed in groundscope's own code while ``fn(text)`` runs."""
    count = 0

    def local(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame: Any, event: str, arg: Any) -> Any:
        return local if frame.f_code.co_filename.startswith(SRC) else None

    sys.settrace(calls)
    try:
        fn(text)
    except Exception:  # the work is measured, not the outcome
        pass
    finally:
        sys.settrace(None)
    return count


def assert_linear(measure: Callable[[int], int], n: int) -> None:
    small, large = measure(n), measure(4 * n)
    assert large <= 4.5 * small + 200, f"work {small} at n={n}, {large} at 4n: not linear"


PARSERS: dict[str, tuple[Callable[[str], Any], Callable[[int], str]]] = {
    "object_spans {": (json_reply.object_spans, lambda n: "{" * n),
    'object_spans {"': (json_reply.object_spans, lambda n: '{"' * n),
    'object_spans "{': (json_reply.object_spans, lambda n: 'x{"' + '"{' * n),
    "object_spans mixed": (json_reply.object_spans,
                           lambda n: "".join(random.Random(n).choice('{}"\\ab') for _ in range(n))),
    "parse_verdict {": (parse_verdict, lambda n: "{" * n + '{"verdict": "A"}'),
    "strip_reasoning <think>": (choice.strip_reasoning, lambda n: "<think>" * n),
    "strip_reasoning <think": (choice.strip_reasoning, lambda n: "<think" * n),
    "strip_reasoning blocks": (choice.strip_reasoning, lambda n: "<think>a</think>b" * n),
    "extract_choice ANSWER:": (lambda s: choice.extract_choice(s, "ABCD"), lambda n: "ANSWER: " * n),
    "extract_choice answer: (": (lambda s: choice.extract_choice(s, "ABCD"),
                                 lambda n: "answer: (A, " * n),
    "prompt blocks": (lambda s: quoted(s, "element"), lambda n: "<element>\n" * n),
    "split_prompt": (split_prompt, lambda n: JUDGE_MARKER + "\n\n" + "<question>\n" * n),
    "normalise hundreds": (normalise.normalise_answer, lambda n: "one " + "hundred " * n),
}


@pytest.mark.parametrize("name", list(PARSERS))
def test_python_work_is_linear(name: str) -> None:
    fn, make = PARSERS[name]
    assert_linear(lambda n: python_lines(fn, make(n)), 2000)


def test_judge_reply_of_stray_braces_is_read_in_one_pass() -> None:
    """The issue's reply: 8,000 '{' then the verdict. One pass, and the same answer."""
    work = python_lines(parse_verdict, "{" * 8000 + '{"verdict": "B", "reasoning": "no"}')
    assert work < 200_000  # ~10 lines per brace; rescanning after each took ~3e8
    assert parse_verdict("{" * 8000 + '{"verdict": "B"}').label == "B"


def test_rouge_memory_is_linear_in_a_long_answer() -> None:
    """ROUGE-L's bit masks were built for every token of the longer text, each as wide as
    its position: n distinct tokens took ~n^2/16 bytes (36 s and GBs for a 4 MB answer)."""
    from groundscope.scoring.text import rouge

    def peak(n: int) -> int:
        answer = " ".join(f"w{i}" for i in range(n))
        tracemalloc.start()
        try:
            rouge(answer + " ", "the cat sat on the mat")  # a new text: no token cache hit
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    assert_linear(peak, 4000)


def test_rouge_l_beyond_its_bound_is_a_failed_score() -> None:
    import asyncio

    from groundscope.scoring.base import ReferenceScorer, TooLongToScore
    from groundscope.scoring.text import LCS_MAX_PAIRS, lcs_length, rouge
    from groundscope.types import Completion, Origin, Prediction, PredictionStatus, Sample, ScoreStatus

    side = int(LCS_MAX_PAIRS**0.5) + 1
    long_text = " ".join(f"w{i % 997}" for i in range(side))
    with pytest.raises(TooLongToScore, match="token pairs"):
        lcs_length(long_text.split(), long_text.split())
    sample = Sample(id="1", dataset="d", subset="s", messages=(), origin=Origin("f", 1),
                    target=(long_text,), question="q")
    prediction = Prediction("1", "h", PredictionStatus.OK, Completion(long_text))
    score = asyncio.run(ReferenceScorer("rouge", (), rouge).score(sample, prediction))
    assert score.status is ScoreStatus.ERROR and "ROUGE-L would compare" in score.detail["error"]


def test_deep_or_huge_json_in_a_reply_is_a_reply_error() -> None:
    for reply in ('{"verdict": "A", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
                  '{"verdict": "A", "x": ' + "1" * 5000 + "}"):
        with pytest.raises(json_reply.ReplyError, match="cannot be read"):
            json_reply.extract_object(reply)


def test_number_word_runs_are_bounded() -> None:
    assert normalise.normalise_answer("one " + "hundred " * 5000).split()[:3] == [
        "one", "hundred", "hundred"]
    assert normalise.normalise_answer("nine hundred ninety nine thousand") == "999000"


def test_rewritten_scanners_give_the_old_answers() -> None:
    """The linear scanners against the old rescanning ones, kept here as the reference, on
    random texts made of the characters (and tags) that matter."""
    think_block = re.compile(r"<think\b[^>]*>.*?</think\s*>", re.IGNORECASE | re.DOTALL)
    think_open = re.compile(r"<think\b[^>]*>", re.IGNORECASE)

    def old_strip(text: str) -> str:
        text = think_block.sub("", text)
        closes = list(choice._THINK_CLOSE.finditer(text))
        if closes:
            text = text[closes[-1].end():]
        opened = think_open.search(text)
        return text[: opened.start()] if opened else text

    def old_spans(text: str) -> list[str]:
        spans: list[str] = []
        pos = 0
        while True:
            depth, start, in_string, escaped, found = 0, 0, False, False, []
            for i in range(pos, len(text)):
                ch = text[i]
                if in_string:
                    if escaped:
                        escaped = False
                    elif ch == "\\":
                        escaped = True
                    elif ch == '"':
                        in_string = False
                elif ch == '"' and depth:
                    in_string = True
                elif ch == "{":
                    start = i if depth == 0 else start
                    depth += 1
                elif ch == "}" and depth:
                    depth -= 1
                    if depth == 0:
                        found.append(text[start:i + 1])
            spans += found
            if not depth:
                return spans
            pos = start + 1

    rng = random.Random(12)
    tags = ["<think>", "</think>", "<think", "</think >", "<THINK x>", "<thinking>", ">", "a",
            "\n", "ANSWER: ", "B"]
    for _ in range(20_000):
        text = "".join(rng.choice('{}"\\a ') for _ in range(rng.randint(0, 40)))
        assert json_reply.object_spans(text) == old_spans(text), text
        text = "".join(rng.choice(tags) for _ in range(rng.randint(0, 12)))
        assert choice.strip_reasoning(text) == old_strip(text), text


# Every module-level regex of the code that reads untrusted text (scoring, dataset, media, the
# simulator's judge modes), with why its cost is linear in the text it reads.
REVIEWED = {
    r"</think\s*>": "literal start; the \\s run after one '</think' is scanned once",
    r"<think\b": "fixed width (the tag's end is found with str.find)",
    r"answer\s*[:：]": "literal start; the \\s run after one 'answer' is scanned once",
    r"(?:\s|\*|_|\$|\\\(|\\\[|\\(?:boxed|fbox|text|textbf|mathbf|mathrm)\s*\{)*":
        "anchored at one marker's end: reads that marker's decoration once",
    r"(?P<open>[(\[{（【]\s*)?(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])": "anchored, one token",
    r"[ \t]*(?:[,，/、&+]|[ \t](?:and|or)[ \t])[ \t]*(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])":
        "anchored after one label",
    r"[ \t]*[)\]}）】]": "anchored after one label",
    r"[\s)\]}）】*_$.。]*(?:\n|$)": "anchored after one label; the run is scanned once",
    r"(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])": "fixed width",
    r'[{}"\\]': "one character",
    "&(amp|lt|gt);": "fixed width",
    r"(?<=\d),(?=\d{3}\b)": "fixed width",
    r"['\u2019`]": "one character",
    r"[^\w\s.]|_|(?<!\d)\.|\.(?!\d)": "fixed width",
    r"-?\d+(?:\.\d+)?": "fullmatch of one word",
    r"\w+": "finditer over word runs, each read once",
    r"(?<=[.!?])\s+": "a whitespace run after a mark, each read once",
    r"<(image|video|audio)[ _](\d+)>": "literal start; a digit run after one tag, read once",
    rb"\r\n?|\n": "fixed width",
    "[\x00\udc80-\udcff]": "one character",
    "https?://": "fixed width, match at the start",
    r"[A-Za-z0-9+/\s]++(?:={1,2}\s*+)?": "possessive: fullmatch reads the text once",
    "sig|token|key|secret|pass|auth|credential": "literals",
    r"([A-Za-z][A-Za-z0-9+.-]*)://": "match at the start only",
    "(?<![0-9A-Za-z_])'": "one character",
    r"\(([\w']+)\)\(\?#X\)\(([\w']+)\)": "reads NLTK's pattern sources, not text",
    "[.?!]": "one character",
    "[!-~]*[?!] +[A-Za-z0-9]": "match at the start of one Punkt context: its run read twice",
    r"([A-Za-z]{2,})\. +[A-Za-z0-9]": "match at the start of one Punkt context",
    r"\\(?:\d+|g<\w+>)": "reads NLTK's replacement strings, not text",
    "[^A-Za-z0-9._+-]": "one character (file names)",
    "[\u4e00-\u9fa5]": "one character",
    "[。！？?]": "one character",
}
READERS = ("groundscope.scoring", "groundscope.dataset", "groundscope.media",
           "groundscope.client.sim_")
# The patterns that rescanned the rest of the text from where they started, at every start.
QUADRATIC = [r'r"<think\b[^>]*>.*?</think\s*>"', r'r"<think\b[^>]*>"', r'rf"<{tag}>\n(.*?)\n</{tag}>"',
             r'r"[A-Za-z0-9+/\s]+={0,2}\s*"']


def test_every_parsing_regex_is_reviewed() -> None:
    import importlib
    import pkgutil

    for info in pkgutil.walk_packages(groundscope.__path__, "groundscope."):
        if not info.name.startswith(READERS):
            continue
        for attr, value in vars(importlib.import_module(info.name)).items():
            value = getattr(value, "__self__", value)  # a bound .match / .search
            if isinstance(value, re.Pattern):
                assert value.pattern in REVIEWED, f"{info.name}.{attr} = {value.pattern!r}: review it"
    for path in Path(SRC).rglob("*.py"):
        source = path.read_text(encoding="utf-8")
        for pattern in QUADRATIC:
            assert pattern not in source, f"{path}: {pattern}"


# --- item 12 end to end: the issue's texts through the simulator and the CLI ---------------

CPU_CEILING = 60  # seconds of CPU for a whole CLI run; the linear code needs ~3


def _run_capped(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_CEILING, CPU_CEILING + 5))

    return subprocess.run([sys.executable, "-m", "groundscope", *args], cwd=cwd, text=True,
                          capture_output=True, timeout=600, preexec_fn=cap)


class Planted:
    """The evaluated model: the answer planted for the question it is asked."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers

    def __call__(self, req: SimRequest) -> SimReply | None:
        for question, answer in self.answers.items():
            if any(question in text for text in req.texts):
                return SimReply(answer)
        return None


HOSTILE_ANSWERS = {  # question -> (answer, the letter read from it)
    "Question one?": ("<think>" * 120_000 + "ANSWER: B", None),  # 840 KB, never closed
    "Question two?": ("ANSWER: " * 120_000 + "B", "B"),
    "Question three?": ("<think" * 120_000 + " ANSWER: C", "C"),
}


def test_pathological_answers_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with (data / "mcq.jsonl").open("w") as fh:
        for question in HOSTILE_ANSWERS:
            fh.write(json.dumps({"question": question, "options": ["w", "x", "y", "z"],
                                 "answer": "B"}) + "\n")
    model = Planted({q: a for q, (a, _) in HOSTILE_ANSWERS.items()})
    with SimulatorServer(responders=[model]) as url:
        proc = _run_capped(["eval", "--api-url", url, "--model", "m", "--datasets", "general_vmcq",
                            "--dataset-args", json.dumps({"general_vmcq": {"local_path": "data"}}),
                            "--work-dir", "out", "--no-progress"], tmp_path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    reviews = [json.loads(line) for p in tmp_path.glob("out/*/reviews/*/*.jsonl")
               for line in p.read_text().splitlines()]
    assert len(reviews) == 3
    predictions = {json.loads(line)["sample_id"]: json.loads(line)
                   for p in tmp_path.glob("out/*/predictions/*/*.jsonl")
                   for line in p.read_text().splitlines()}
    for row in reviews:
        question = predictions[row["sample_id"]]["sample"]["question"]
        assert row["extracted"] == HOSTILE_ANSWERS[question][1], question


JUDGE_REPLIES = {
    "Question one?": "{" * 40_000 + '{"reasoning": "same", "verdict": "A"}',
    "Question two?": '{"verdict": "A", "x": ' + "[" * 100_000 + "]" * 100_000 + "}",
    "Question three?": "<think" * 100_000 + '{"verdict": "B", "reasoning": "no"}',
}


class HostileJudge:
    """A judge whose reply for each question is given (``JUDGE_REPLIES``): the issue's 8,000
    (here 40,000) '{' before a verdict, JSON nested 100,000 deep, 100,000 '<think' (never a
    tag) before the verdict."""

    def __call__(self, req: SimRequest) -> SimReply | None:
        prompt = req.texts[0] if req.texts else ""
        if not prompt.startswith(JUDGE_MARKER):
            return None
        parts = split_prompt(prompt)
        assert parts is not None
        return SimReply(JUDGE_REPLIES[parts[0]])


def test_pathological_judge_replies_end_to_end(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    with (data / "vqa.jsonl").open("w") as fh:
        for question in JUDGE_REPLIES:
            fh.write(json.dumps({"messages": [{"role": "user", "content": question}],
                                 "answer": "Dog"}) + "\n")
    with SimulatorServer(responders=[Planted(dict.fromkeys(JUDGE_REPLIES, "Dog"))]) as url, \
            SimulatorServer(responders=[HostileJudge()]) as judge_url:
        judge = {"strategy": "llm", "models": {"model_id": "j", "api_url": judge_url}}
        proc = _run_capped(["eval", "--api-url", url, "--model", "m", "--datasets", "general_vqa",
                            "--dataset-args", json.dumps({"general_vqa": {"local_path": "data"}}),
                            "--judge", json.dumps(judge), "--work-dir", "out", "--no-progress"],
                           tmp_path)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert "Traceback" not in proc.stderr
    rows = [json.loads(line) for p in tmp_path.glob("out/*/reviews/*/*.jsonl")
            for line in p.read_text().splitlines()]
    outcomes = sorted(f"{r['status']} {r['detail'].get('verdict')}" for r in rows)
    # one correct, one incorrect, one judge_failed (its reply never parses: recorded, no crash)
    assert outcomes == ["judge_failed None", "ok A", "ok B"], [r["detail"] for r in rows]
