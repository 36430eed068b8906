"""The English tokenizer's spec cache (``groundscope.scoring.english_spec``): the first build
imports nltk and writes the spec, later builds use it without importing nltk, and either
way tokens are NLTK's. Every test uses its own cache dir under tmp_path."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from groundscope.scoring import english as E
from groundscope.scoring import english_spec as S

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
]
_WORDS = ["the", "cat", "The", "It", "He", "I", "A", "Mr.", "Dr.", "U.S.", "e.g.", "etc.", "3.14",
          "1,000", "don't", "it's", "they'll", "cannot", "(left)", '"red"', "--", "J.", "5", "No.",
          "Inc.", "café", "O'Neil", "dogs'", "'tis", "x.y", "“quoted”", "«fr»"]
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


def _oracle() -> Tokenize:
    """NLTK's ``word_tokenize`` with the Punkt parameters it would use here (without
    ``punkt_tab``: ours), as tests/test_text_metrics.py builds it."""
    from nltk.tokenize.destructive import NLTKWordTokenizer
    from nltk.tokenize.punkt import PunktSentenceTokenizer

    punkt, words = PunktSentenceTokenizer(E.punkt_parameters()), NLTKWordTokenizer()
    return lambda text: [w for sentence in punkt.tokenize(text) for w in words.tokenize(sentence)]


@pytest.fixture(scope="module")
def nltk_tokenize() -> Tokenize:
    return _oracle()


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "cache"
    monkeypatch.setenv("GROUNDSCOPE_CACHE_DIR", str(directory))
    return directory


def _spec_file() -> Path:
    location = S.spec_location()
    assert location is not None
    return Path(location[0])


def _warm_cache() -> Path:
    """Build from nltk (writing the spec), and check the next build uses the spec."""
    assert not E._load_tokenizer().from_spec
    path = _spec_file()
    assert path.is_file()
    assert E._load_tokenizer().from_spec
    return path


def _rewrite(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """Change the spec, its digest recomputed (so only the change itself is judged)."""
    spec = json.loads(path.read_text())
    del spec["digest"]
    change(spec)
    path.write_text(json.dumps({**spec, "digest": S._digest(spec)}))


def _assert_matches(tokenizer: E.EnglishTokenizer, oracle: Tokenize, texts: list[str]) -> None:
    for text in texts:
        assert tokenizer.tokenize(text) == oracle(text), repr(text)


# ---------------------------------------------------------------- where and what

def test_cache_dir_and_file_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from importlib.metadata import version

    monkeypatch.setenv("GROUNDSCOPE_CACHE_DIR", "/srv/gs-cache")
    monkeypatch.setenv("XDG_CACHE_HOME", "/xdg")
    assert S._cache_dir() == "/srv/gs-cache"
    location = S.spec_location()
    assert location is not None
    assert location == (f"/srv/gs-cache/english-spec-v{S._SPEC_FORMAT}-nltk-{version('nltk')}.json",
                        version("nltk"))
    monkeypatch.delenv("GROUNDSCOPE_CACHE_DIR")
    assert S._cache_dir() == "/xdg/groundscope"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as XDG says
    monkeypatch.setenv("HOME", "/home/someone")
    assert S._cache_dir() == "/home/someone/.cache/groundscope"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert S._cache_dir() == "/home/someone/.cache/groundscope"


def test_spec_built_tokenizer_matches_nltk(cache_dir: Path, nltk_tokenize: Tokenize) -> None:
    built = E._load_tokenizer()
    assert not built.from_spec and built._punkt is not None
    spec = json.loads(_spec_file().read_text())
    assert spec["nltk"] == S.spec_location()[1]  # type: ignore[index]
    assert spec["origin"]["nltk_data"] == os.environ.get("NLTK_DATA")
    cached = E._load_tokenizer()
    assert cached.from_spec and cached._punkt is None
    # the same patterns: engine (each as nltk compiled it), source and flags
    for ours, theirs in zip(S._patterns_of(cached._parts), S._patterns_of(built._parts), strict=True):
        assert type(ours) is type(theirs)
        assert (ours.pattern, ours.flags) == (theirs.pattern, theirs.flags)
    engines = {p["engine"] for name in S._STEP_LISTS for p, _ in spec["parts"][name]}
    engines |= {p["engine"] for name in S._PATTERN_LISTS for p in spec["parts"][name]}
    assert engines <= set(S._ENGINES)
    assert cached._parts.abbrev_types == built._parts.abbrev_types
    assert cached.needs_nltk_often == built.needs_nltk_often

    direct = E.EnglishTokenizer()  # built from nltk, not through the cache
    for text in CORPUS:
        expected = nltk_tokenize(text)
        assert cached.tokenize(text) == expected, repr(text)
        assert built.tokenize(text) == expected and direct.tokenize(text) == expected, repr(text)
        assert cached.sentences(text) == direct.sentences(text), repr(text)
    assert cached._punkt is not None  # "Dr. Smith" and others asked NLTK's Punkt, built on demand


def test_warm_cache_tokenizes_without_importing_nltk(cache_dir: Path, nltk_tokenize: Tokenize) -> None:
    typical = ["The cat sat on the mat.", "There are two dogs in the picture. Both are brown.",
               "Yes! The man is holding an umbrella.", "Is it red? I think it's blue, not red.",
               "The sign says \"STOP\" (in red letters); it's at the corner."]
    fallback = "Dr. Smith arrived. Then he left."
    _warm_cache()
    if E._load_tokenizer().needs_nltk_often:
        pytest.skip("NLTK's punkt_tab is installed here: nltk is needed early by design")
    code = textwrap.dedent(f"""
        import json, sys
        from groundscope.scoring import english as E
        E.warm_up()
        out = {{"from_spec": E.english().from_spec, "often": E.needs_nltk_often(),
               "typical": [E.english().tokenize(t) for t in {typical!r}],
               "nltk_before": "nltk" in sys.modules}}
        out["fallback"] = E.english().tokenize({fallback!r})
        out["nltk_after"] = "nltk" in sys.modules
        print(json.dumps(out))
    """)
    env = {**os.environ, "GROUNDSCOPE_CACHE_DIR": str(cache_dir)}
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert out["from_spec"] is True and out["often"] is False
    assert out["typical"] == [nltk_tokenize(t) for t in typical]
    assert out["nltk_before"] is False
    assert out["fallback"] == nltk_tokenize(fallback) == ["Dr.", "Smith", "arrived", ".", "Then", "he",
                                                          "left", "."]
    assert out["nltk_after"] is True


def test_lazy_punkt_is_built_once_across_threads(cache_dir: Path, nltk_tokenize: Tokenize) -> None:
    _warm_cache()
    tokenizer = E._load_tokenizer()
    texts = ["Dr. Who is here. Mr. Smith too.", "J. Bach. U.S. policy changed.", "See 3. The end."]
    barrier, results, punkts = threading.Barrier(6), [], []

    def work() -> None:
        barrier.wait()
        results.append([tokenizer.tokenize(text) for text in texts])
        punkts.append(tokenizer._punkt)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [[nltk_tokenize(text) for text in texts]] * 6
    assert len({id(punkt) for punkt in punkts}) == 1 and punkts[0] is not None


# ---------------------------------------------------------------- bad or stale files

def _truncated(path: Path) -> bytes:
    data = path.read_bytes()
    return data[: len(data) // 2]


def _edited(path: Path) -> bytes:  # by hand: a replacement changed, the digest left alone
    spec = json.loads(path.read_text())
    spec["parts"]["double_dashes"][1] = " == "
    return json.dumps(spec).encode()


BAD_FILES: dict[str, Callable[[Path], bytes]] = {
    "garbage": lambda _: b"\x00\xff\xfe garbage \x80\x81",
    "empty": lambda _: b"",
    "truncated": _truncated,
    "not an object": lambda _: b"[1, 2, 3]",
    "edited": _edited,
}


def _set_flags(value: object) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        spec["parts"]["period_context"]["flags"] = value
    return change


def _set(path: tuple[str, ...], value: object) -> Callable[[dict[str, Any]], None]:
    def change(spec: dict[str, Any]) -> None:
        target = spec
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return change


WRONG_TYPES: dict[str, Callable[[dict[str, Any]], None]] = {
    "flags str": _set_flags("8288"),
    "flags bool": _set_flags(True),
    "flags float": _set_flags(8288.0),
    "source not str": _set(("parts", "boundary_realignment", "source"), None),
    "bad source": _set(("parts", "boundary_realignment", "source"), "(unclosed"),
    "engine unknown": _set(("parts", "period_context", "engine"), "pickle"),
    "engine list": _set(("parts", "period_context", "engine"), ["re"]),
    "collocations int": _set(("parts", "collocations"), 0),
    "abbrev_types str": _set(("parts", "abbrev_types"), "dr mr"),
    "abbrev_types ints": _set(("parts", "abbrev_types"), [1, 2]),
    "step too long": _set(("parts", "double_dashes"), [{"engine": "re", "source": "--", "flags": 32},
                                                        " -- ", "x"]),
    "steps not list": _set(("parts", "punctuation"), {"a": 1}),
    "extra key": _set(("extra",), 1),
    "origin missing key": lambda spec: spec["origin"].pop("probe"),
    "probe float": _set(("origin", "probe"), [["/nowhere", 1.5, 0, 0]]),
    "search_path str": _set(("origin", "search_path"), "/root/nltk_data"),
    "format str": _set(("format",), "1"),
    "no groups": _set(("parts", "period_context"), {"engine": "re", "source": "[.?!]", "flags": 32}),
}


@pytest.mark.parametrize("make", list(BAD_FILES.values()), ids=list(BAD_FILES))
def test_bad_file_is_rebuilt(make: Callable[[Path], bytes], cache_dir: Path, nltk_tokenize: Tokenize) -> None:
    path = _warm_cache()
    path.write_bytes(make(path))
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec
    _assert_matches(tokenizer, nltk_tokenize, FIXED_TEXTS)
    assert E._load_tokenizer().from_spec  # rewritten, valid
    assert not [p.name for p in cache_dir.iterdir() if p.name.endswith(".tmp")]


@pytest.mark.parametrize("change", list(WRONG_TYPES.values()), ids=list(WRONG_TYPES))
def test_wrong_types_are_rebuilt(change: Callable[[dict[str, Any]], None], cache_dir: Path,
                                 nltk_tokenize: Tokenize) -> None:
    path = _warm_cache()
    _rewrite(path, change)
    with pytest.raises(Exception) as rejected:  # ours, or re / regex compile errors
        S._decode_spec(path.read_text(), S.spec_location()[1])  # type: ignore[index]
    assert "digest" not in str(rejected.value)  # refused for the change itself
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec
    _assert_matches(tokenizer, nltk_tokenize, FIXED_TEXTS[:6])
    assert E._load_tokenizer().from_spec


STALE: dict[str, tuple[tuple[str, ...], object, str]] = {
    "nltk version": (("nltk",), "3.0.0", "nltk version"),
    "format": (("format",), 0, "spec format"),
    "regex version": (("regex",), "2000.1.1", "regex version"),
    "NLTK_DATA": (("origin", "nltk_data"), "/elsewhere/nltk_data", "NLTK_DATA changed"),
    "search path": (("origin", "search_path"), ["/elsewhere/nltk_data"], "search path changed"),
    "punkt_tab found then": (("origin", "probe"),
                             [["/elsewhere/tokenizers/punkt_tab/english", 1, 2, 16877]], "punkt_tab changed"),
}


@pytest.mark.parametrize(("key", "value", "reason"), list(STALE.values()), ids=list(STALE))
def test_stale_spec_is_rebuilt(key: tuple[str, ...], value: object, reason: str, cache_dir: Path,
                               nltk_tokenize: Tokenize) -> None:
    path = _warm_cache()
    _rewrite(path, _set(key, value))
    with pytest.raises(S._SpecError, match=reason):
        S._decode_spec(path.read_text(), S.spec_location()[1])  # type: ignore[index]
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec
    _assert_matches(tokenizer, nltk_tokenize, FIXED_TEXTS[:6])
    fresh = json.loads(path.read_text())
    target = fresh
    for part in key:
        target = target[part]
    assert target != value  # rewritten with this process's value
    assert E._load_tokenizer().from_spec


def test_nltk_data_set_since_the_spec_was_written(cache_dir: Path, monkeypatch: pytest.MonkeyPatch,
                                                  tmp_path: Path) -> None:
    path = _warm_cache()
    written, before = path.read_bytes(), os.environ.get("NLTK_DATA")
    monkeypatch.setenv("NLTK_DATA", str(tmp_path / "elsewhere"))
    assert not E._load_tokenizer().from_spec
    # nltk (imported before) still searches its old path: nothing to record, the file is kept
    assert path.read_bytes() == written
    if before is None:
        monkeypatch.delenv("NLTK_DATA")
    else:
        monkeypatch.setenv("NLTK_DATA", before)
    assert E._load_tokenizer().from_spec


def test_unwritable_cache_dir_still_tokenizes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              nltk_tokenize: Tokenize) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("GROUNDSCOPE_CACHE_DIR", str(blocker / "cache"))
    for _ in range(2):
        tokenizer = E._load_tokenizer()
        assert not tokenizer.from_spec
        _assert_matches(tokenizer, nltk_tokenize, FIXED_TEXTS)
    assert blocker.read_text() == "not a directory"


def test_spec_directory_is_a_directory(cache_dir: Path, nltk_tokenize: Tokenize) -> None:
    _spec_file().mkdir(parents=True)  # the file's name taken by a directory: unreadable, unwritable
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec
    _assert_matches(tokenizer, nltk_tokenize, FIXED_TEXTS[:6])


# ---------------------------------------------------------------- punkt_tab installed, changed, removed

def _install_punkt_tab(root: Path) -> Path:
    model = root / "tokenizers" / "punkt_tab" / "english"
    model.mkdir(parents=True)
    (model / "collocations.tab").write_text("johann\tbach\nst.\tpaul\n")
    (model / "sent_starters.txt").write_text("the\nhe\nit\n")
    (model / "abbrev_types.txt").write_text("dr\nmr\nu.s\ne.g\n")
    (model / "ortho_context.tab").write_text("the\t2\nbach\t4\n")
    return model


def test_punkt_tab_changes_invalidate_the_spec(cache_dir: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    import nltk

    data = tmp_path / "nltk_data"
    data.mkdir()
    # as in a process started with NLTK_DATA set: nltk's search path begins with it
    monkeypatch.setenv("NLTK_DATA", str(data))
    monkeypatch.setattr(nltk.data, "path", S._nltk_search_path())
    path = _warm_cache()
    assert json.loads(path.read_text())["origin"]["probe"] == []

    model = _install_punkt_tab(data)
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec and tokenizer.needs_nltk_often
    origin = json.loads(path.read_text())["origin"]
    assert origin["punkt_tab"] is not None and origin["punkt_tab"].startswith(str(model))
    assert len(origin["probe"]) == 5  # the directory and its four files
    cached = E._load_tokenizer()
    assert cached.from_spec and cached.needs_nltk_often and cached._parts.collocations
    assert cached._parts.abbrev_types == {"dr", "mr", "u.s", "e.g"}
    _assert_matches(cached, _oracle(), CORPUS[:120])  # NLTK with the trained parameters

    stamp = (model / "abbrev_types.txt").stat().st_mtime_ns + 10**9
    os.utime(model / "abbrev_types.txt", ns=(stamp, stamp))
    assert not E._load_tokenizer().from_spec
    assert E._load_tokenizer().from_spec

    for file in model.iterdir():
        file.unlink()
    model.rmdir()
    tokenizer = E._load_tokenizer()
    assert not tokenizer.from_spec and not tokenizer.needs_nltk_often
    assert E._load_tokenizer().from_spec


def test_spec_and_nltk_disagree_after_loading(cache_dir: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """punkt_tab installed after the spec was checked: NLTK's Punkt, built on first need, brings
    its parameters, and the shortcuts take them too."""
    import nltk

    data = tmp_path / "nltk_data"
    data.mkdir()
    monkeypatch.setenv("NLTK_DATA", str(data))
    monkeypatch.setattr(nltk.data, "path", S._nltk_search_path())
    _warm_cache()
    tokenizer = E._load_tokenizer()
    assert tokenizer.from_spec and not tokenizer.needs_nltk_often
    _install_punkt_tab(data)
    texts = ["Dr. Who came. Johann Bach wrote. St. Paul is a city. The end."]
    _assert_matches(tokenizer, _oracle(), texts)
    assert tokenizer.needs_nltk_often
