"""Texts built to make parsing quadratic (issue 12, item 12): answers, ``<think>`` blocks,
judge replies, prompt blocks, number words, ROUGE inputs.

How work is measured. Wall time is not used. What a test can count exactly:

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
from groundscope.scoring import choice, json_reply, normalise
from groundscope.scoring.grounding_prompt import quoted
from groundscope.scoring.judge_prompt import JUDGE_MARKER, parse_verdict, split_prompt
from groundscope.simulator import SimulatorServer
from groundscope.simulator.wire import SimReply, SimRequest

SRC = str(Path(groundscope.__file__).parent)  # the code under test, wherever it is installed


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
    "extract_choice markers in reasoning": (lambda s: choice.extract_choice(s, "ABCD"),
                                            lambda n: "ANSWER: [X] <think>ANSWER: E</think>" * n
                                            + "ANSWER: [X]</think>ANSWER: E"),
    "extract_choice blanks after a label": (lambda s: choice.extract_choice(s, "ABCD"),
                                            lambda n: "答案：A" + " \t" * n + "."),
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

    # A first call carries one-off allocations (~0.1 MB) that made n look larger; and the
    # lists' and dicts' growth steps put a linear peak at up to ~4.7x for 4x the tokens
    # (0.52 MB at n=4,000, 2.42 MB at 16,000), where the quadratic masks gave ~12x.
    peak(4000)
    small, large = peak(4000), peak(16000)
    assert large <= 6 * small, f"peak {small} B at n=4000, {large} B at 4n: not linear"


def test_long_answers_are_not_kept_by_the_token_caches() -> None:
    """Token lists are cached per text (4,096 entries): a run of multi-megabyte answers
    kept them all (GBs). Scoring five distinct 250 KB answers now retains no memory."""
    import gc

    from groundscope.scoring.text import bleu, rouge

    bleu("warm up", "the tokenizers"), rouge("warm up", "the tokenizers")
    answers = [" ".join(f"t{k}w{i}" for i in range(30_000)) for k in range(5)]  # ~250 KB
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for answer in answers:
            bleu(answer, "the cat sat."), rouge(answer, "the cat sat.")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < 1 << 20, kept


def test_the_token_caches_hold_a_bounded_size_of_answers_under_the_cached_length() -> None:
    """Answers under the cached length (64 K characters) were kept by count, 4,096 of them:
    a run of 52 KB answers (a verbose model's, or an endpoint's) grew by ~0.5 MB a sample,
    2 GB by its 4,096th. They are now kept up to a size budget. English and Chinese alike."""
    import gc

    from groundscope.scoring.text import bleu, rouge
    from groundscope.scoring.tokenize import CACHE_BYTES, CACHED_CHARS

    bleu("warm up 热身", "the tokenizers"), rouge("warm up", "the tokenizers 分词")
    english = [" ".join(f"a{k}w{i}" for i in range(5_000)) for k in range(24)]  # ~40 KB
    chinese = ["".join(f"猫坐在垫子上{k}号{i}" for i in range(600)) for k in range(4)]
    assert all(len(text) <= CACHED_CHARS for text in (*english, *chinese))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for answer in (*english, *chinese):
            bleu(answer, "the cat sat."), rouge(answer, "the cat sat.")
        del answer
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < CACHE_BYTES + (1 << 20), kept  # these 28 answers held 8.9 MB before


def test_the_token_caches_count_a_text_that_is_mostly_whitespace() -> None:
    """The size of a cached entry was estimated from its tokens alone: 300 texts of 65,000
    spaces and two words were 2 KB each to the cache and 65 KB each in memory (20 MB)."""
    import gc

    from groundscope.scoring.text import bleu
    from groundscope.scoring.tokenize import CACHE_BYTES

    bleu("warm up", "the tokenizers")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for k in range(300):  # each text made here and dropped: the cache alone keeps it
            bleu(f"w{k}" + " " * 65_000 + "end", "the cat sat.")
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert kept < CACHE_BYTES + (1 << 20), kept


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


@pytest.mark.parametrize("metric", ["bleu", "rouge"])
@pytest.mark.parametrize("side", ["answer", "reference"])
def test_a_text_over_the_scored_size_is_a_failed_score(monkeypatch: pytest.MonkeyPatch,
                                                       metric: str, side: str) -> None:
    """BLEU and ROUGE hold every token of both texts at once: a text over MAX_SCORED_CHARS
    (the default reply cap; a crafted predictions file's line may be 64 MiB) is an error
    score, never hundreds of MB. The bound is the largest length scored."""
    import asyncio

    from groundscope.scoring import text
    from groundscope.scoring.base import ReferenceScorer
    from groundscope.types import Completion, Origin, Prediction, PredictionStatus, Sample, ScoreStatus

    assert text.MAX_SCORED_CHARS == 4 * 1024 * 1024
    monkeypatch.setattr(text, "MAX_SCORED_CHARS", 100)
    fn = text.bleu if metric == "bleu" else text.rouge

    def scored(length: int) -> object:
        long_text = ("the cat sat " * 20)[:length]
        answer, reference = (long_text, "the cat") if side == "answer" else ("the cat", long_text)
        sample = Sample(id="1", dataset="d", subset="s", messages=(), origin=Origin("f", 1),
                        target=(reference,), question="q")
        prediction = Prediction("1", "h", PredictionStatus.OK, Completion(answer))
        return asyncio.run(ReferenceScorer(metric, (), fn).score(sample, prediction))

    assert scored(100).status is ScoreStatus.OK  # type: ignore[attr-defined]
    over = scored(101)
    assert over.status is ScoreStatus.ERROR  # type: ignore[attr-defined]
    assert f"{metric.upper()}: the {side} has 101 characters" in over.detail["error"]  # type: ignore[attr-defined]


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
    r"(?:answer|答案)\s*[:：]": "literal start; the \\s run after one marker word is scanned once",
    r"(?:\s|\*|_|\$|\\\(|\\\[|\\(?:boxed|fbox|text|textbf|mathbf|mathrm)\s*\{)*":
        "anchored at one marker's end: reads that marker's decoration once",
    r"(?P<open>[(\[{（【]\s*)?(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])": "anchored, one token",
    r"[ \t]*(?:[,，/、&+][ \t]*|(?:and|or)[ \t]+)?(?P<label>[A-Za-z0-9]+)(?![A-Za-z0-9])":
        "anchored after one label; its blank runs are read at most twice",
    r"[ \t]*[)\]}）】]": "anchored after one label",
    r"[\s)\]}）】*_$.。]*(?:\n|$)": "anchored after one label; the run is scanned once",
    r"(?<![A-Za-z0-9])[A-Z](?![A-Za-z0-9])": "fixed width",
    r'[{}"\\]': "one character",
    "&(amp|lt|gt);": "fixed width",
    r"<claim_(\d{1,6})>\n([^<]*)\n</claim_\1>":
        "literal start; the [^<] run after one '<claim_N>' stops at the next '<' and only its "
        "last character can start the closing tag: each run read twice at most",
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
           "groundscope.simulator.judge", "groundscope.simulator.grounding")
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


# --- item 12 end to end: the texts through the simulator and the CLI ---------------

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
    # 840 KB, never closed: the marker in the cut-off reasoning is the only answer (issue 13)
    "Question one?": ("<think>" * 120_000 + "ANSWER: B", "B"),
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
    # 240 KB: under judge.max_reply_chars (256 Ki), so it is parsed, not refused unread
    "Question three?": "<think" * 40_000 + '{"verdict": "B", "reasoning": "no"}',
}


class HostileJudge:
    """A judge whose reply for each question is given (``JUDGE_REPLIES``): the issue's 8,000
    (here 40,000) '{' before a verdict, JSON nested 100,000 deep, 40,000 '<think' (never a
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


def test_rouge_l_at_exactly_its_bound_is_scored() -> None:
    """LCS_MAX_PAIRS is the largest allowed product, not the first refused one (a mutant
    with '>=' refused it): 2**20 x 2**10 tokens are scored, one token more is refused."""
    from groundscope.scoring.base import TooLongToScore
    from groundscope.scoring.text import LCS_MAX_PAIRS, lcs_length

    long_side = [f"w{i % 5000}" for i in range(LCS_MAX_PAIRS // 1024)]
    short_side = [f"w{i}" for i in range(1024)]
    assert lcs_length(long_side, short_side) == 1024
    with pytest.raises(TooLongToScore, match="token pairs"):
        lcs_length([*long_side, "w0"], short_side)
