"""The English tokenizer (``groundscope.scoring.english``) against NLTK's public
``nltk.word_tokenize`` on ~300 texts: in this process, with the Punkt parameters nltk would
use here, and in a fresh process where a trained ``punkt_tab`` model is installed, so that
``nltk.word_tokenize`` itself runs unaided. Targeted inputs per shortcut are in
tests/test_text_metrics.py."""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from cli_support import dataset_samples
from groundscope.scoring import english as E
from groundscope.simulator import SimBehaviour, SimulatorServer

Tokenize = Callable[[str], list[str]]

FIXED_TEXTS = [
    "The cat sat on the mat.",
    "Dr. Smith went to Washington. He arrived at 3 p.m. on Monday.",
    "Animals, e.g. cats and dogs, are pets. Others, i.e. wolves, are not.",
    "Wait... what? No! Really?! Yes.",
    "1. First item 2. Second item 3. The third one.",
    "The U.S. economy grew. The U.K. one did not.",
    "\"I can't do it,\" she said. 'Why not?' he asked!",
    "He said “hello” and left… Then he returned. ‘Fine,’ she said.",
    "It costs $3.50 (roughly) -- or so; maybe 4% & more @ #1 *today*.",
    "Tabs\tand\nnewlines\n\nbetween sentences. Yes.\r\nDone.",
    "Mr. and Mrs. Jones live on Main St. in Springfield. They like it.",
    "J. Bach wrote it. J. S. Bach, actually. A. Nother.",
    "Gonna wanna gimme lemme cannot 'tis 'twas d'ye more'n gotta.",
    "They'll say it's O'Neil's dog's bone, won't they? I'd think so. We're sure.",
    "«Bonjour», dit-il. „Hallo“, sagte sie. Ça va.",
    "A sentence without a final mark",
    "",
    "   ",
    "No. 5 is next. No. It isn't.",
    "Ellipsis at end...",
    "(Parenthetical sentence.) Next sentence. [Another one.] Last.",
    "Numbers: 1,000,000 and 3.14159 and 2.5e10. Then 4. Then five.",
    "Emails like a.b@c.com and URLs like http://x.org/a?b=c. Fine!",
    "End with quote.\" Next one starts. End with paren.) Next.",
    "Em—dash and en–dash and -- double. Etc. etc. The end.",
    # a word of over 256 characters before a period: a context too long to memoise
    "See " + "x1" * 150 + ". The end. And " + "A" * 300 + ". More.",
    "Link: https://example.org/" + "a/" * 200 + "page.html. Next one.",
    "Johann S. Bach wrote. St. Paul is a city. Approx. five left.",
]
_WORDS = ["the", "cat", "The", "It", "He", "I", "A", "Mr.", "Dr.", "U.S.", "e.g.", "etc.", "3.14",
          "1,000", "don't", "it's", "they'll", "cannot", "(left)", '"red"', "--", "J.", "5", "No.",
          "Inc.", "café", "O'Neil", "dogs'", "'tis", "x.y", "“quoted”", "«fr»", "Johann", "Bach",
          "St.", "approx."]
_ENDINGS = ["", "", "", ".", ",", "!", "?", ":", ";", ".)", '."', "...", ".”", "!!", "?!"]
_GAPS = [" ", " ", " ", "  ", "\n", "\t", " \n "]


def _corpus(count: int = 300) -> list[str]:
    rng = random.Random(5)
    texts = list(FIXED_TEXTS)
    while len(texts) < count:
        texts.append("".join(rng.choice(_WORDS) + rng.choice(_ENDINGS) + rng.choice(_GAPS)
                             for _ in range(rng.randint(1, 12))).strip(" "))
    return texts


CORPUS = _corpus()


def _word_tokenize(params: Any) -> Tokenize:
    """``nltk.word_tokenize`` with the Punkt parameters ``params``: its sentence split is
    ``PunktSentenceTokenizer(params)``, then ``nltk.word_tokenize`` itself per sentence."""
    import nltk
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    punkt = PunktSentenceTokenizer(params)
    return lambda text: [word for sentence in punkt.tokenize(text)
                         for word in nltk.word_tokenize(sentence, preserve_line=True)]


def test_matches_nltk_word_tokenize_here() -> None:
    """Without punkt_tab installed ``nltk.word_tokenize`` cannot run: the oracle is its
    pipeline with the parameters the tokenizer uses then (ours). With it: itself."""
    import nltk

    oracle = nltk.word_tokenize if E.find_punkt_tab() is not None else _word_tokenize(E.punkt_parameters())
    english = E.english()
    for text in CORPUS:
        assert english.tokenize(text) == oracle(text), repr(text)


def test_steps_are_nltks_patterns() -> None:
    """Each step runs NLTK's own pattern (source and flags), unwrapped from any timeout guard."""
    import regex
    from nltk.tokenize import NLTKWordTokenizer as Word

    pairs = [*Word.STARTING_QUOTES, *Word.PUNCTUATION, Word.PARENS_BRACKETS, Word.DOUBLE_DASHES,
             *Word.ENDING_QUOTES, *((p, "") for p in (*Word.CONTRACTIONS2, *Word.CONTRACTIONS3))]
    for pattern, _ in pairs:
        ours = E.unwrapped(pattern)
        assert isinstance(ours, (re.Pattern, regex.Pattern))
        assert (ours.pattern, ours.flags) == (pattern.pattern, pattern.flags)


def _install_punkt_tab(root: Path) -> Any:
    """A punkt_tab model for English under ``root`` (an NLTK_DATA dir), trained on the corpus
    by NLTK's trainer, with a few abbreviations and a collocation ours lack."""
    from nltk.tokenize.punkt import PunktTrainer

    trainer = PunktTrainer()
    trainer.INCLUDE_ALL_COLLOCS = True
    trainer.train(" ".join(CORPUS * 3) + " Johann S. Bach wrote. J. Bach. J. Bach.")
    params = trainer.get_params()
    params.abbrev_types |= {"no", "approx", "st"}
    params.collocations.add(("st", "paul"))
    model = root / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True)
    lines = {"collocations.tab": ["\t".join(pair) for pair in sorted(params.collocations)],
             "sent_starters.txt": sorted(params.sent_starters),
             "abbrev_types.txt": sorted(params.abbrev_types),
             "ortho_context.tab": [f"{word}\t{n}" for word, n in sorted(params.ortho_context.items())]}
    for name, rows in lines.items():
        (model / name).write_text("\n".join(rows), encoding="utf-8")
    return params


def test_matches_nltk_word_tokenize_with_punkt_tab_installed(tmp_path: Path) -> None:
    params = _install_punkt_tab(tmp_path / "nltk_data")
    assert params.collocations and params.ortho_context
    code = (
        "import json, sys, nltk\n"
        "from groundscope.scoring import english as E\n"
        "texts = json.load(sys.stdin)\n"
        "print(json.dumps({'abbreviations': sorted(E.punkt_parameters().abbrev_types),\n"
        "                  'ours': [E.english().tokenize(t) for t in texts],\n"
        "                  'nltk': [nltk.word_tokenize(t) for t in texts]}))\n"
    )
    env = {**os.environ, "NLTK_DATA": str(tmp_path / "nltk_data")}
    done = subprocess.run([sys.executable, "-c", code], input=json.dumps(CORPUS), env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["abbreviations"] == sorted(params.abbrev_types)  # the installed model is used
    for text, ours, theirs in zip(CORPUS, out["ours"], out["nltk"], strict=True):
        assert ours == theirs, repr(text)
    # the model changes some results, so this compared more than the no-model case did
    default = _word_tokenize(E.punkt_parameters())
    assert sum(ours != default(text) for text, ours in zip(CORPUS, out["ours"], strict=True)) >= 5


_BARE_BUILD_WATCHED = """
import json, sys
seen = []
class Watch:  # every module the build imports, by name
    def find_spec(self, name, path=None, target=None):
        seen.append(name)
        return None
sys.meta_path.insert(0, Watch())
from groundscope.scoring import english as E
tokenizer = E.english()
sys.meta_path.pop(0)
import nltk
from nltk.grammar import CFG
loaded = nltk.data.load("grammars/toy.cfg")
text = "It is Mr. Smith's dog. No. 5 barked."
print(json.dumps({"abbreviations": sorted(tokenizer._abbreviations),
                  "grammar_modules": sorted({n for n in seen if n.startswith(
                      ("nltk.grammar", "nltk.sem", "nltk.featstruct"))}),
                  "ours": tokenizer.tokenize(text), "nltk": nltk.word_tokenize(text),
                  "cfg": isinstance(loaded, CFG), "rules": len(loaded.productions())}))
"""


def test_a_bare_build_skips_the_grammar_modules_and_reads_an_installed_model(tmp_path: Path) -> None:
    """The bare build gives ``nltk.data`` empty stand-ins for NLTK's grammar and semantics
    modules, which it uses only to load grammar and logic files (18 of the build's ~66 ms):
    none of them is imported, the installed punkt_tab model is still found and read (its
    abbreviations, not ours), and a later ``import nltk`` loads a grammar file as NLTK
    does."""
    root = tmp_path / "nltk_data"
    params = _install_punkt_tab(root)
    (root / "grammars").mkdir()
    (root / "grammars" / "toy.cfg").write_text("S -> NP VP\nNP -> 'dogs'\nVP -> 'bark'\n")
    env = {**os.environ, "NLTK_DATA": str(root)}
    out = subprocess.run([sys.executable, "-c", _BARE_BUILD_WATCHED], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["grammar_modules"] == []
    assert got["abbreviations"] == sorted(params.abbrev_types) != sorted(E.punkt_parameters().abbrev_types)
    assert got["ours"] == got["nltk"]
    assert (got["cfg"], got["rules"]) == (True, 3)


_BARE_BUILD_MEETS_A_LATER_NLTK = """
import sys
import groundscope.scoring.nltkload as L
from groundscope.scoring import english as E
three = L._import_three
def later_nltk():  # as a later nltk might: nltk.data.find reads a grammar module as it runs
    parts = three()
    find = parts.data.find
    def find_with_grammar(*args, **kwargs):
        from nltk import grammar
        grammar.CFG
        return find(*args, **kwargs)
    parts.data.find = find_with_grammar
    return parts
L._import_three = later_nltk
print(E.english().tokenize("It is Mr. Smith's dog."), "nltk.grammar" in sys.modules)
"""


def test_a_bare_build_that_fails_as_it_runs_is_built_again_from_nltk_whole() -> None:
    """Where a later nltk's functions use a module the bare import left as an empty
    stand-in (here ``nltk.data.find`` reading ``nltk.grammar``), the build is done again
    with nltk imported whole: the same tokens, at the old cost, instead of no tokenizer."""
    out = subprocess.run([sys.executable, "-c", _BARE_BUILD_MEETS_A_LATER_NLTK],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['It', 'is', 'Mr.', 'Smith', \"'s\", 'dog', '.'] True"


_BARE_BUILD_FAILING_OTHERWISE = """
import sys
from groundscope.scoring import english as E
class Deadline(Exception):  # as a signal handler's timeout would, during the build
    pass
build = E.EnglishTokenizer._build
fired = []
def failing(self, nltk, params):
    if sys.argv[1] == "deadline" and not fired:  # once, as a timer would
        fired.append(True)
        raise Deadline("deadline passed")
    return build(self, nltk, object() if sys.argv[1] == "parameters" else params)
E.EnglishTokenizer._build = failing
try:
    E.english()
    print("built", "nltk" in sys.modules)
except Exception as exc:
    print(type(exc).__name__, exc.__context__ is None, "nltk" in sys.modules)
"""


@pytest.mark.parametrize(("how", "raised"), [("deadline", "Deadline"),
                                             ("parameters", "AttributeError")])
def test_a_bare_build_failing_for_another_reason_is_not_built_again(how: str, raised: str) -> None:
    """Only a failure a stand-in causes is retried from nltk whole: another exception
    raised during the build (a signal handler's timeout, a caller's mistake) goes to the
    caller as it is, once, with no nltk imported (found by an outside attack: the first was
    swallowed and the build done again, the second raised twice after nltk's whole import)."""
    out = subprocess.run([sys.executable, "-c", _BARE_BUILD_FAILING_OTHERWISE, how],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"{raised} True False"


_REAL_GRAMMAR_LEFT_BEHIND = """
import sys
import nltk.grammar
real = sys.modules["nltk.grammar"]
del sys.modules["nltk"]  # as a test fixture might: nltk gone, its grammar module left
from groundscope.scoring import english as E
words = E.english().tokenize("It is Mr. Smith's dog.")
import nltk
from nltk.grammar import CFG
print(words, sys.modules["nltk.grammar"] is real, CFG is real.CFG)
"""


def test_a_real_nltk_module_in_sys_modules_is_never_stood_over() -> None:
    """With any nltk module imported (here ``nltk.grammar`` left without ``nltk``), the
    build does not go bare: a stand-in put over the real module stayed there after the
    build, and ``from nltk.grammar import CFG`` failed for the rest of the process (found
    by an outside attack)."""
    out = subprocess.run([sys.executable, "-c", _REAL_GRAMMAR_LEFT_BEHIND],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['It', 'is', 'Mr.', 'Smith', \"'s\", 'dog', '.'] True True"


_BUILD_THEN_REPORT = """
import sys
from groundscope.scoring.english import english
words = english().tokenize("It is Mr. Smith's dog, isn't it? Yes.")
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("nltk", "numpy", "scipy", "sklearn"))
import scipy.stats
import nltk
from nltk.metrics import association
print(words, loaded, association.fisher_exact is scipy.stats.fisher_exact,
      nltk.word_tokenize("It's Mr. Smith's.", preserve_line=True), nltk.tokenize.punkt.__name__)
"""
_WORDS = ['It', 'is', 'Mr.', 'Smith', "'s", 'dog', ',', 'is', "n't", 'it', '?', 'Yes', '.']
_LATER_NLTK = "['It', \"'s\", 'Mr.', 'Smith', \"'s\", '.'] nltk.tokenize.punkt"


def test_building_the_tokenizer_leaves_no_nltk_behind() -> None:
    """The build imports three of nltk's modules without the package's import of everything
    (which pulls scipy.stats in where scipy is installed: 0.6 s of CPU, 65 MB of RSS), and
    takes its nltk entries out of ``sys.modules`` when it is done: no nltk, numpy or scipy
    module is left, and the program's own later ``import nltk`` is NLTK's whole, with its
    scipy-backed extras (before 2026-12-06 those behaved as if scipy were not installed)."""
    pytest.importorskip("scipy", reason="scipy is not installed")
    out = subprocess.run([sys.executable, "-c", _BUILD_THEN_REPORT], capture_output=True,
                         text=True, check=True).stdout.strip()
    assert out == f"{_WORDS} [] True {_LATER_NLTK}"


def test_nltk_imported_first_is_used_as_it_is() -> None:
    """A program that imports nltk before groundscope: the tokenizer uses its modules and
    leaves them imported."""
    pytest.importorskip("scipy", reason="scipy is not installed")
    code = "import nltk, nltk.tokenize.punkt as first\n" + _BUILD_THEN_REPORT + (
        "from groundscope.scoring.nltkload import tokenizer_modules\n"
        "with tokenizer_modules() as parts:\n"
        "    print(parts.punkt is first is sys.modules['nltk.tokenize.punkt'])\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip().splitlines()
    assert out[0].startswith(f"{_WORDS} ['nltk', "), out
    assert out[0].endswith(f"True {_LATER_NLTK}"), out
    assert out[1] == "True"


_BUILD_BESIDE_ANOTHER_THREAD = """
import sys, threading
from groundscope.scoring.english import english
other = threading.Event()
beside = threading.Thread(target=other.wait)  # the program's own thread, alive meanwhile
beside.start()
builder = threading.Thread(target=english)
builder.start()
builder.join()
other.set()
nltk = sys.modules.get("nltk")
print(nltk is not None and hasattr(nltk, "word_tokenize"), "scipy" in sys.modules)
"""


def test_a_build_beside_another_thread_imports_nltk_whole() -> None:
    """Where another thread runs, it could ``import nltk`` while the empty stand-in packages
    are in ``sys.modules``, and keep the empty one (found by an outside attack: a library
    user's module importing nltk while a run built its tokenizer in a thread got no
    ``word_tokenize``, for good). So there the build imports nltk whole, as any import
    would, with scipy kept out of that import."""
    pytest.importorskip("scipy", reason="scipy is not installed")
    out = subprocess.run([sys.executable, "-c", _BUILD_BESIDE_ANOTHER_THREAD],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True False"


_INTERRUPTED_BUILD = """
import sys
class Interrupt:  # Ctrl-C as the build imports one of nltk's modules
    def find_spec(self, name, path=None, target=None):
        if name == "nltk.probability":
            raise KeyboardInterrupt
        return None
sys.meta_path.insert(0, Interrupt())
from groundscope.scoring.english import EnglishTokenizer
try:
    EnglishTokenizer()
except KeyboardInterrupt:
    print(sorted(m for m in sys.modules if m.startswith("nltk")))
sys.meta_path.pop(0)
import nltk
print(nltk.word_tokenize("It's Mr. Smith's.", preserve_line=True))
"""


def test_an_interrupted_build_leaves_no_empty_nltk_package() -> None:
    """A KeyboardInterrupt (any exception) during the bare import takes its stand-in
    packages out too: left in ``sys.modules``, a later ``import nltk`` (a notebook after
    Ctrl-C) got an empty package (found by an outside attack)."""
    out = subprocess.run([sys.executable, "-c", _INTERRUPTED_BUILD], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['It', \"'s\", 'Mr.', 'Smith', \"'s\", '.']"]


_BUILD_BESIDE_A_THREAD_THREADING_DOES_NOT_KNOW = """
import _thread, sys, threading
from groundscope.scoring.english import english
started, stop = threading.Event(), threading.Event()
def hidden():  # a thread started with _thread (as pytest-xdist's workers are): no Thread object
    started.set()
    stop.wait(60)
_thread.start_new_thread(hidden, ())
started.wait(60)
english()
stop.set()
nltk = sys.modules.get("nltk")
print(threading.active_count(), nltk is not None and hasattr(nltk, "word_tokenize"))
"""


def test_a_build_beside_a_thread_threading_does_not_know_imports_nltk_whole() -> None:
    """``threading.active_count()`` does not count a thread started with ``_thread``; it
    could import nltk during a bare build all the same (found by an outside attack)."""
    out = subprocess.run([sys.executable, "-c", _BUILD_BESIDE_A_THREAD_THREADING_DOES_NOT_KNOW],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1 True"


_IMPORT_ON_THE_BUILDING_THREAD = """
import sys
grabbed = []
class Meanwhile:  # code on the building thread (a signal handler, a finalizer) imports nltk
    def find_spec(self, name, path=None, target=None):
        if name == "nltk.probability" and not grabbed:
            import nltk
            grabbed.append(nltk)
        return None
sys.meta_path.insert(0, Meanwhile())
from groundscope.scoring.english import english
words = english().tokenize("It is Mr. Smith's dog.")
nltk = grabbed[0]
tokens = nltk.word_tokenize("It's Mr. Smith's.", preserve_line=True)
print(words == ['It', 'is', 'Mr.', 'Smith', "'s", 'dog', '.'], nltk is not sys.modules["nltk"], tokens)
"""


def test_nltk_imported_on_the_building_thread_during_a_bare_build_works_after_it() -> None:
    """Code that runs on the building thread during a bare build and imports nltk gets the
    empty stand-in package; once the build is over, what the stand-in lacks is looked up on
    nltk imported whole (found by an outside attack: the empty package, for good)."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_ON_THE_BUILDING_THREAD],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True True ['It', \"'s\", 'Mr.', 'Smith', \"'s\", '.']"


_INTERRUPTED_CLEAN_UP = """
import sys
from groundscope.scoring.english import EnglishTokenizer
def tracer(frame, event, arg):  # Ctrl-C as the stand-ins are taken out, one of two gone
    if not frame.f_code.co_filename.endswith("nltkload.py"):
        return None
    def local(frame, event, arg):
        if event == "line" and "nltk" not in sys.modules and "nltk.tokenize" in sys.modules:
            sys.settrace(None)
            raise KeyboardInterrupt
        return local
    return local
sys.settrace(tracer)
try:
    EnglishTokenizer()
except KeyboardInterrupt:
    print(sorted(m for m in sys.modules if m.startswith("nltk")))
sys.settrace(None)
import nltk
print(nltk.word_tokenize("It's Mr. Smith's.", preserve_line=True))
"""


def test_an_interrupted_clean_up_still_takes_every_stand_in_out() -> None:
    """A KeyboardInterrupt while the bare build's entries leave ``sys.modules`` (after
    ``nltk``, before ``nltk.tokenize``) left the empty ``nltk.tokenize`` behind: every
    later ``import nltk`` failed (found by an outside attack). The clean-up finishes, then
    the interrupt is raised."""
    out = subprocess.run([sys.executable, "-c", _INTERRUPTED_CLEAN_UP], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "['It', \"'s\", 'Mr.', 'Smith', \"'s\", '.']"]


_RUN_THEN_REPORT = """
import json, sys, threading
from groundscope import run_task
cfg = json.loads(sys.argv[1])
if sys.argv[2] == "thread":  # run_task from a thread of a program that goes on meanwhile
    done = []
    worker = threading.Thread(target=lambda: done.append(run_task(cfg)))
    worker.start()
    worker.join()
    report = done[0]
else:
    report = run_task(cfg)
bleu = [r.score for r in report.datasets[0].metrics if r.metric.lower().startswith("bleu") and r.score]
nltk = sys.modules.get("nltk")
print(len(bleu) > 0, None if nltk is None else hasattr(nltk, "word_tokenize"))
"""


@pytest.mark.parametrize(("how", "nltk_after"), [("main", "None"), ("thread", "True")])
def test_a_run_builds_the_tokenizer_bare_only_as_the_only_thread(
        tmp_path: Path, how: str, nltk_after: str) -> None:
    """A run whose thread is the process's only one (``groundscope eval``, a script's
    ``run_task``) builds the tokenizer itself before its first request, with the bare import
    (no nltk module is left after it); a run from a thread of a program that goes on
    meanwhile builds it in its background thread with nltk imported whole (a failure would
    show as no BLEU). One request at a time, so the background build starts before the
    first answer is scored."""
    data = tmp_path / "data"
    data.mkdir()
    records = [{"messages": [{"role": "user", "content": f"Say thing {i}."}],
                "answer": f"It is thing {i}, Mr. Smith."} for i in range(3)]
    (data / "qa.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    args = {"general_vqa": {"local_path": str(data), "subset_list": ["qa"], "metric_list": ["BLEU"]}}
    with SimulatorServer(dataset_samples("general_vqa", args), SimBehaviour(accuracy=1.0)) as url:
        cfg = {"model": "m", "api_url": url, "datasets": ["general_vqa"], "dataset_args": args,
               "eval_batch_size": 1, "work_dir": str(tmp_path / "out")}
        out = subprocess.run([sys.executable, "-c", _RUN_THEN_REPORT, json.dumps(cfg), how],
                             capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"True {nltk_after}"


_FAKE_NLTK = {
    "nltk/__init__.py": "READY = True\nfrom nltk import data\n",
    "nltk/data.py": "",
    "nltk/tokenize/__init__.py": "",
    "nltk/tokenize/punkt.py": "from nltk import READY  # needs the package's __init__\n",
    "nltk/tokenize/destructive.py": "",
}

_BLOCK_THEN_REPORT = """
import sys
from groundscope.scoring.nltkload import tokenizer_modules
with tokenizer_modules() as parts:
    inside = sys.modules["nltk"].__dict__.get("READY"), parts.punkt.READY
print(inside, sorted(m for m in sys.modules if m.startswith("nltk")))
"""


def test_an_nltk_whose_modules_need_their_package_is_imported_whole(tmp_path: Path) -> None:
    """Where a release's tokenizer modules need the package's ``__init__`` (here a stand-in
    nltk whose punkt imports a name its ``__init__`` sets), the empty packages are taken out
    and nltk is imported whole, and stays imported as any import would."""
    for name, text in _FAKE_NLTK.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    out = subprocess.run([sys.executable, "-c", _BLOCK_THEN_REPORT], capture_output=True,
                         text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ("(True, True) ['nltk', 'nltk.data', 'nltk.tokenize', "
                                  "'nltk.tokenize.destructive', 'nltk.tokenize.punkt']")


_IMPORT_WHILE_ANOTHER_LOOKS = r"""
import sys, threading
from groundscope.scoring.nltkload import tokenizer_modules

asked, go = threading.Event(), threading.Event()


class Hold:  # holds the first `import nltk` (in its own thread) until it is told to go on
    def find_spec(self, name, path=None, target=None):
        if name == "nltk" and not go.is_set():
            asked.set()
            go.wait(60)
        return None


sys.meta_path.insert(0, Hold())
def build():
    with tokenizer_modules(bare=True):  # beside this thread: nltk whole, extras refused
        pass


worker = threading.Thread(target=build)
worker.start()
asked.wait(60)
# Another thread's import looks through the finders as importlib does (a for loop over the
# live sys.meta_path), one finder in when the nltk import ends:
finders = iter(sys.meta_path)
seen = [next(finders)]
go.set()
worker.join()
seen += list(finders)
print("nltk" in sys.modules, [type(f).__name__ for f in sys.meta_path if all(f is not s for s in seen)])
"""


def test_the_nltk_import_skips_no_finder_of_an_import_in_another_thread() -> None:
    """Beside another thread, the build imports nltk whole, in a background thread while the
    event loop may import too. Taking the import's own finder out of ``sys.meta_path`` when it
    ended shifted the list under a lookup in progress: that lookup skipped a finder (the
    one that finds the module: ModuleNotFoundError for an installed module)."""
    out = subprocess.run([sys.executable, "-c", _IMPORT_WHILE_ANOTHER_LOOKS], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "True []"
