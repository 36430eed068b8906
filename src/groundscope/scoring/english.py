"""English word tokens with NLTK ``word_tokenize`` semantics, without downloaded data.

Punkt sentence split (NLTK's trained ``punkt_tab`` parameters when that model is installed,
else ours: common abbreviations and sentence starters), then ``NLTKWordTokenizer``'s steps
per sentence. Built once, on first use or by ``warm_up`` (a run does it before its first
request, or beside its first requests in a background thread), from NLTK's public objects: the
``NLTKWordTokenizer`` class's step lists, a ``PunktLanguageVars`` and a
``PunktSentenceTokenizer`` over the parameters. Contexts the shortcuts below leave undecided
ask that Punkt (``text_contains_sentbreak``), memoised.

English shortcuts, each exactly NLTK's result (tests compare with NLTK on targeted input):

* Punkt's candidate/realignment loop runs here, without its generator chain. A text with
  no [.?!] before its end is one sentence. Two context shapes are breaks without token
  annotation: "?"/"!", spaces, a letter or digit (the mark is its own token, a break in
  the first pass, kept by the second); with no collocations in the parameters, "word."
  (2+ ASCII letters, no abbreviation: one token, not an initial, number or ellipsis),
  spaces, a letter or digit. Other contexts ask NLTK, memoised (a function of the context).
* A final [.?!] after an ASCII letter or digit is split off first: NLTK makes it a token,
  and every other pattern sees a letter or digit before it as before the string's end.
* Word steps run in order, each only if characters it needs are present (unknown patterns
  always run); fixed-string steps use ``str.replace`` (leftmost, non-overlapping, as the
  regex); "\\s+" -> " " runs only for whitespace other than " " (later patterns need one
  space next to a non-space or a word boundary; the final split ignores runs).
* A ``(?i)`` contraction runs only if its literal is in the (ASCII, lower-cased) text; for
  other text one case-insensitive search decides for all.
* Recent NLTK wraps its patterns in a timeout guard (``nltk.redos.TimedPattern``: a
  ``regex`` pattern behind a Python call per match); the steps here use the same pattern
  compiled again from its public ``pattern`` and ``flags`` (:func:`unwrapped`).
"""

from __future__ import annotations

import functools
import re
import string
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from groundscope.scoring.nltkload import NltkTokenizerModules, StandInMissing, tokenizer_modules

if TYPE_CHECKING:
    from nltk.tokenize.punkt import PunktParameters

__all__ = ["EnglishTokenizer", "english", "find_punkt_tab", "punkt_parameters", "unwrapped", "warm_up"]

_CACHE_SIZE = 4096
_CACHED_CONTEXT = 256  # characters: a text without spaces can make a context of megabytes

# Abbreviations (lower case, final period removed) that do not end a sentence. Ours, kept
# to unambiguous forms: words that also end sentences ("no", "sat", "mar") are left out.
_ABBREVIATIONS = frozenset(str.split(
    "mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx a.m p.m u.s u.k u.n u.s.a "
    "inc ltd co corp dept univ assn bros jan feb apr aug sept oct nov dec gen gov sen rep "
    "capt col lt sgt rev messrs fig vol pp ph.d ave blvd"
))
# Capitalised words that start a new sentence after an abbreviation or an ellipsis.
_SENT_STARTERS = frozenset(str.split(
    "the a an this that these those it its he she we they i you there but and however in "
    "on at for if when while after before as so his her their our my what why how also "
    "then yet still although because since"
))

# Whitespace other than " " (for Python's and the regex module's \s, and a few more): the
# "\s+" -> " " step matters only with one of these.
_OTHER_SPACE = ("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u180e\u2028\u2029\u202f\u205f\u3000"
                "\u200b\ufeff" + "".join(map(chr, range(0x2000, 0x200B))))
# Patterns matching fixed strings only: source -> one multi-character string or characters.
_LITERALS: Mapping[str, tuple[str, ...]] = {
    "(``)": ("``",), "--": ("--",), "''": ("''",), '"': ('"',), "[;@#$%&]": tuple(";@#$%&"),
    "[\\u2012-\\u2015]": tuple("\u2012\u2013\u2014\u2015"), "[?!]": tuple("?!"), "[*]": ("*",),
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": tuple("[](){}<>"), "([»”’])": tuple("»”’"),
}
_FINAL_PERIOD = ("([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$", "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$")
_CLOSERS = "]})>\"'»”’ "


def _final_period(text: str) -> bool:
    return text.rstrip().rstrip(_CLOSERS).endswith(".")


def _any_of(*pieces: str) -> Callable[[str], bool]:
    return lambda text: any(map(text.__contains__, pieces))


_COLON_END = (":", ",", ":\n", ",\n")  # "$" also matches before a final newline
_QUOTE_START = re.compile("(?<![0-9A-Za-z_])'").search  # (?<!\w)': no word character before
# Other patterns: source -> (characters one of which any match contains, a further
# necessary test of the current text or None).
_GATES: Mapping[str, tuple[str, Callable[[str], bool] | None]] = {
    "([«“‘„]|[`]+)": ("«“‘„`", None), '^\\"': ('"', lambda text: text.startswith('"')),
    "([ \\(\\[{<])(\\\"|\\'{2})": ("\"'", _any_of('"', "''")),
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": ("'", _QUOTE_START),
    _FINAL_PERIOD[0]: (".", _final_period), _FINAL_PERIOD[1]: (".", _final_period),
    "([:,])([^\\d])": (":,", None), "([:,])$": (":,", lambda text: text.endswith(_COLON_END)),
    "\\.{2,}": (".", lambda text: ".." in text), "([^'])' ": ("'", lambda text: "' " in text),
    "([^' ])('[sS]|'[mM]|'[dD]|') ": ("'", _any_of(*(f"'{c} " for c in ("", *"sSmMdD")))),
    "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": ("'", _any_of(*(
        f"{c} " for c in ("'ll", "'LL", "'re", "'RE", "'ve", "'VE", "n't", "N'T")))),
}
_ALNUM = frozenset(string.ascii_letters + string.digits)
# Contractions are written "(?i)...(can)(?#X)(not)..." in NLTK: the two groups, joined, are
# a literal that any match contains.
_CONTRACTION = re.compile(r"\(([\w']+)\)\(\?#X\)\(([\w']+)\)")
_SENT_END = re.compile(r"[.?!]")
# Punkt contexts decided here (see the module notes).
_MARK_BREAK = re.compile(r"[!-~]*[?!] +[A-Za-z0-9]").match
_WORD_PERIOD = re.compile(r"([A-Za-z]{2,})\. +[A-Za-z0-9]").match

# A step: (characters one of which must be present or None, a test of the current text or
# None, the substitution, the characters other than spaces its replacement may add).
Step = tuple[frozenset[str] | None, Callable[[str], bool] | None, Callable[[str], str], frozenset[str]]
Planned = tuple[Callable[[str], bool] | None, Callable[[str], str]]  # (test, substitution)
_BACKREF = re.compile(r"\\(?:\d+|g<\w+>)")


def _replacer(pairs: tuple[tuple[str, str], ...]) -> Callable[[str], str]:
    def replace(text: str) -> str:
        for old, new in pairs:
            text = text.replace(old, new)
        return text

    return replace


def _step(pattern: Any, replacement: str) -> Step:
    compiled = unwrapped(pattern)
    source = compiled.pattern
    literals = _LITERALS.get(source, ())
    if literals and all(compiled.fullmatch(literal) for literal in literals):
        pairs = tuple((literal, compiled.sub(replacement, literal)) for literal in literals)
        adds = frozenset("".join(new for _, new in pairs)) - frozenset("".join(literals) + " ")
        return frozenset(literal[0] for literal in literals), None, _replacer(pairs), adds
    substitute = functools.partial(compiled.sub, replacement)
    adds = frozenset(_BACKREF.sub("", replacement)) - {" "}
    if source == "\\s+" and replacement == " ":
        return frozenset(_OTHER_SPACE), None, substitute, adds
    chars, test = _GATES.get(source, (None, None))
    return (None if chars is None else frozenset(chars)), test, substitute, adds


def _plan(stages: Sequence[Sequence[Step]], found: frozenset[str]) -> list[list[Planned]]:
    """Per stage, the steps that may match a text whose gating characters are ``found``
    (the characters earlier steps may add are taken as present)."""
    present, plans = set(found), []
    for steps in stages:
        plan = []
        for chars, test, substitute, adds in steps:
            if chars is None or not chars.isdisjoint(present):
                plan.append((test, substitute))
                present |= adds
        plans.append(plan)
    return plans


def _run(plan: Sequence[Planned], text: str) -> str:
    for test, substitute in plan:
        if test is None or test(text):
            text = substitute(text)
    return text


def _contraction_literal(pattern: Any) -> str | None:
    """The lower-case literal any match of a ``(?i)`` contraction pattern contains."""
    found = _CONTRACTION.search(pattern.pattern)
    if found is None or not pattern.pattern.startswith("(?i)"):
        return None
    return (found.group(1) + found.group(2)).lower()


def unwrapped(pattern: Any) -> Any:
    """``pattern`` as a compiled ``re`` or ``regex`` pattern: NLTK's timeout wrapper (any other
    object with ``pattern`` and ``flags``, over a ``regex`` pattern) is compiled again from
    those, with ``regex``, as NLTK compiled it.

    >>> from nltk.tokenize import NLTKWordTokenizer
    >>> nltk_pattern, _ = NLTKWordTokenizer.STARTING_QUOTES[0]
    >>> ours = unwrapped(nltk_pattern)
    >>> (ours.pattern, ours.flags) == (nltk_pattern.pattern, nltk_pattern.flags)
    True
    """
    if isinstance(pattern, re.Pattern):
        return pattern
    import regex  # nltk's own dependency: its wrapped patterns are regex patterns

    if isinstance(pattern, regex.Pattern):
        return pattern
    return regex.compile(pattern.pattern, pattern.flags)


def find_punkt_tab() -> Any | None:
    """nltk's pointer to the English ``punkt_tab`` model, or None when it finds none."""
    with tokenizer_modules() as nltk:
        try:
            return nltk.data.find("tokenizers/punkt_tab/english/")
        except (LookupError, OSError, ValueError):
            return None


def punkt_parameters() -> PunktParameters:
    """English ``PunktParameters``: NLTK's trained model when ``punkt_tab`` is installed
    (exactly what EvalScope uses), else ours: abbreviations and sentence starters only."""
    with tokenizer_modules() as nltk:
        found = find_punkt_tab()
        if found is not None:
            try:
                return nltk.punkt.load_punkt_params(found)
            except (LookupError, OSError, ValueError):
                pass
        params = nltk.punkt.PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    params.sent_starters = set(_SENT_STARTERS)
    return params


# ---------------------------------------------------------------- the tokenizer

class EnglishTokenizer:
    """NLTK's ``word_tokenize`` without downloaded data: Punkt with ``params`` (by default
    :func:`punkt_parameters`), then the ``NLTKWordTokenizer`` steps run in NLTK's order,
    skipping steps that cannot match. Building it imports three of nltk's modules (~0.05 s
    of CPU where this is the process's only thread, else nltk whole: ~0.14 s;
    :mod:`~groundscope.scoring.nltkload`)."""

    def __init__(self, params: PunktParameters | None = None) -> None:
        bare = False
        try:
            with tokenizer_modules(bare=True) as nltk:
                bare = nltk.bare
                self._build(nltk, punkt_parameters() if params is None else params)
        except (ImportError, StandInMissing):
            if not bare:
                raise
            # an nltk whose functions use a module the bare import left empty: built again
            with tokenizer_modules() as nltk:
                self._build(nltk, punkt_parameters() if params is None else params)

    def _build(self, nltk: NltkTokenizerModules, params: PunktParameters) -> None:
        Word = nltk.destructive.NLTKWordTokenizer
        lang_vars = nltk.punkt.PunktLanguageVars()
        punkt = nltk.punkt.PunktSentenceTokenizer(params, lang_vars=lang_vars)
        self._candidates = unwrapped(lang_vars.period_context_re()).finditer
        self._realign = unwrapped(lang_vars.re_boundary_realignment).match
        self._abbreviations = frozenset(params.abbrev_types)
        self._word_period = None if params.collocations else _WORD_PERIOD
        self._punkt_break = punkt.text_contains_sentbreak
        self._nltk_break = functools.lru_cache(maxsize=_CACHE_SIZE)(self._punkt_break)
        head = (*Word.STARTING_QUOTES, *Word.PUNCTUATION, Word.PARENS_BRACKETS, Word.DOUBLE_DASHES)
        self._head = [_step(p, r) for p, r in head]
        self._tail = [_step(p, r) for p, r in Word.ENDING_QUOTES]
        contractions = map(unwrapped, (*Word.CONTRACTIONS2, *Word.CONTRACTIONS3))
        self._contractions = [(_contraction_literal(p), functools.partial(p.sub, r" \1 \2 "))
                              for p in contractions]
        literals = [literal for literal, _ in self._contractions]
        self._contraction_guard = (None if None in literals else  # for non-ASCII text
                                   re.compile("(?i)" + "|".join(map(re.escape, literals))).search)
        gates = [step[0] for step in (*self._head, *self._tail) if step[0] is not None]
        self._gating = re.compile(f"[{re.escape(''.join(sorted(frozenset().union(*gates))))}]").findall
        self._plans: dict[frozenset[str], list[list[Planned]]] = {}  # by the gating characters found

    def _contains_break(self, context: str) -> bool:
        """Punkt's ``text_contains_sentbreak(context)``."""
        if _MARK_BREAK(context) is not None:
            return True
        if self._word_period is not None:
            found = self._word_period(context)
            if found is not None and found.group(1).lower() not in self._abbreviations:
                return True
        if len(context) > _CACHED_CONTEXT:  # memoise the usual short contexts only
            return self._punkt_break(context)
        return bool(self._nltk_break(context))

    def _contexts(self, text: str) -> list[tuple[Any, str]]:
        """Punkt's ``_match_potential_end_contexts``: each candidate end and its context."""
        found, previous, start, stop = [], None, 0, 0
        for match in self._candidates(text):
            # the word before: after the last whitespace NLTK finds (at index 0 it finds none)
            index = max(map(text[stop:match.start()].rfind, string.whitespace))
            index = index + stop + 1 if index > 0 else start
            if previous is not None and stop <= index:
                found.append((previous, start, stop))
            previous, start, stop = match, index, match.start()
        if previous is not None:
            found.append((previous, start, stop))
        return [(m, text[a:b] + m.group() + m.group("after_tok")) for m, a, b in found]

    def sentences(self, text: str) -> list[str]:
        """Punkt's ``tokenize(text)``: its ``_slices_from_text`` and ``_realign_boundaries``;
        a text with no sentence-end mark before its end is one sentence."""
        end = len(text.rstrip())
        if not end:
            return []
        if _SENT_END.search(text, 0, end - 1) is None:
            return [text[:end]]
        spans, start = [], 0
        for match, context in self._contexts(text):
            if self._contains_break(context):
                spans.append((start, match.end()))
                start = match.start("next_tok") if match.group("next_tok") else match.end()
        spans.append((start, end))
        sentences, shift = [], 0
        for (start, stop), following in zip(spans, [*spans[1:], None], strict=True):
            start += shift
            if following is not None and (found := self._realign(text[following[0]:following[1]])):
                sentences.append(text[start:following[0] + len(found.group(0).rstrip())])
                shift = found.end()
            else:
                shift = 0
                if text[start:stop]:
                    sentences.append(text[start:stop])
        return sentences

    def words(self, sentence: str) -> list[str]:
        """``NLTKWordTokenizer().tokenize(sentence)``: a final ``.?!`` after a letter or digit
        is split off, then the steps its gating characters allow run in order."""
        mark = ""
        if len(sentence) > 1 and sentence[-1] in ".?!" and sentence[-2] in _ALNUM:
            sentence, mark = sentence[:-1], sentence[-1]
        found = frozenset(self._gating(sentence))
        plans = self._plans.get(found)
        if plans is None:
            if len(self._plans) >= _CACHE_SIZE:
                self._plans.clear()
            plans = self._plans[found] = _plan((self._head, self._tail), found)
        tokens = self._contract(_run(plans[1], f" {_run(plans[0], sentence)} ")).split()
        if mark:
            tokens.append(mark)
        return tokens

    def _contract(self, text: str) -> str:
        """The contraction steps; each runs only if its literal is in the text."""
        if text.isascii():  # case-insensitive is ASCII case-insensitive: compare lower case
            lower = text.lower()
            for literal, substitute in self._contractions:
                if literal is None or literal in lower:
                    text = substitute(text)
        elif self._contraction_guard is None or self._contraction_guard(text):
            for _, substitute in self._contractions:
                text = substitute(text)
        return text

    def tokenize(self, text: str) -> list[str]:
        sentences = self.sentences(text)
        if len(sentences) == 1:
            return self.words(sentences[0])
        return [word for sentence in sentences for word in self.words(sentence)]


_BUILD_LOCK = threading.Lock()


@functools.cache
def english() -> EnglishTokenizer:
    """The English tokenizer, built on first call."""
    with _BUILD_LOCK:  # built once even when a warm-up thread and a scorer race for it
        return _english_once()


@functools.cache
def _english_once() -> EnglishTokenizer:
    return EnglishTokenizer()


def warm_up() -> None:
    """Build the English tokenizer now (~0.05-0.1 s of CPU). A run does this before its
    first request where its thread is the process's only one, else in a background thread
    while the first requests are in flight (``sidework.py``)."""
    english()
