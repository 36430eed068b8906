"""Tokenizers of the text metrics, compatible with EvalScope's.

BLEU tokens are NLTK ``word_tokenize`` semantics for English (Punkt sentence split, then
``NLTKWordTokenizer`` per sentence, reproduced without downloaded data) and ``jieba.cut`` for
any text holding a CJK ideograph in U+4E00..U+9FA5. ROUGE tokens are rouge_chinese's: its
sentence cut, then whitespace split; Chinese text is first segmented by jieba and joined with
spaces. Tokenizers are built once, lazily (neither nltk nor jieba is imported until a text
needs it), and token lists are cached per text.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["bleu_tokens", "bleu_words", "contains_chinese", "punkt_parameters", "rouge_tokens",
           "rouge_words"]

_CHINESE = re.compile("[\u4e00-\u9fa5]")
_CACHE_SIZE = 4096

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

# Per NLTKWordTokenizer pattern: the characters one of which any match must contain. A step
# is skipped when none of them can be in the sentence (a pattern not listed always runs).
_STEP_CHARS: Mapping[str, str] = {
    "([«“‘„]|[`]+)": "«“‘„`", '^\\"': '"', "(``)": "`", "([ \\(\\[{<])(\\\"|\\'{2})": "\"'",
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": "'", "([:,])([^\\d])": ":,",
    "([:,])$": ":,", "[;@#$%&]": ";@#$%&", "[\\u2012-\\u2015]": "\u2012\u2013\u2014\u2015",
    "[?!]": "?!", "([^'])' ": "'", "[*]": "*", "[\\]\\[\\(\\)\\{\\}\\<\\>]": "[](){}<>", "--": "-",
    "([»”’])": "»”’", "''": "'", '"': '"', "([^' ])('[sS]|'[mM]|'[dD]|') ": "'",
    "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": "'",
}
# Besides spaces, the steps only ever insert `` and '' (for a " or '' in the text).
_QUOTES, _INSERTED = frozenset("\"'"), frozenset("`'")
# Whitespace other than " " (for Python's and the regex module's \s, and a few more): the
# "\s+" -> " " step changes nothing without one of these or a double space.
_OTHER_SPACE = frozenset("\t\n\v\f\r\x1c\x1d\x1e\x1f\x85\xa0\u1680\u180e\u2028\u2029\u202f"
                         "\u205f\u3000\u200b\ufeff" + "".join(map(chr, range(0x2000, 0x200B))))
# Contractions are written "(?i)...(can)(?#X)(not)..." in NLTK: the two groups, joined, are
# a literal that any match contains.
_CONTRACTION = re.compile(r"\(([\w']+)\)\(\?#X\)\(([\w']+)\)")
_SENT_END = re.compile(r"[.?!]")

# The two final-period patterns need "." followed by closing marks and spaces to the end.
_FINAL_PERIOD = ("([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$", "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$")
_CLOSERS = "]})>\"'»”’ "

# A step: (needed(text, present): False only if the pattern cannot match, sub, replacement),
# where ``present`` holds every character the text may contain.
Chars = frozenset[str] | set[str]
Needed = Callable[[str, Chars], bool]
Step = tuple[Needed | None, Callable[..., str], str]


def _needs_final_period(text: str, present: Chars) -> bool:
    return text.rstrip().rstrip(_CLOSERS).endswith(".")


def _needs_whitespace_run(text: str, present: Chars) -> bool:
    return "  " in text or not _OTHER_SPACE.isdisjoint(present)


def _needed(source: str, replacement: str) -> Needed | None:
    """The cheap test for NLTK pattern ``source``; None (always run) if it is not known."""
    if source in _FINAL_PERIOD:
        return _needs_final_period
    if source == "\\s+" and replacement == " ":
        return _needs_whitespace_run
    if source == "\\.{2,}":
        return lambda text, present: ".." in text
    if source not in _STEP_CHARS:
        return None
    chars = frozenset(_STEP_CHARS[source])
    return lambda text, present: not chars.isdisjoint(present)


def _bare(pattern: Any) -> Any:
    """The compiled pattern inside NLTK's timeout wrapper (same engine, much faster)."""
    return getattr(pattern, "_rx", pattern)


def _step(pattern: Any, replacement: str) -> Step:
    compiled = _bare(pattern)
    return (_needed(compiled.pattern, replacement), compiled.sub, replacement)


def _apply(steps: Sequence[Step], text: str, present: Chars) -> str:
    """Run ``steps`` in order, skipping those that cannot match."""
    for needed, sub, replacement in steps:
        if needed is None or needed(text, present):
            text = sub(replacement, text)
    return text


def _contraction_guard(patterns: Sequence[Any]) -> Callable[[str], object] | None:
    """One search that is false only when none of the contraction patterns can match."""
    literals = []
    for pattern in patterns:
        found = _CONTRACTION.search(pattern.pattern)
        if found is None or not pattern.pattern.startswith("(?i)"):
            return None
        literals.append(re.escape(found.group(1) + found.group(2)))
    return re.compile("(?i)" + "|".join(literals)).search


def punkt_parameters() -> Any:
    """English ``PunktParameters``: NLTK's trained model when ``punkt_tab`` is installed
    (exactly what EvalScope uses), else ours: abbreviations and sentence starters only."""
    import nltk
    from nltk.tokenize.punkt import PunktParameters, load_punkt_params

    try:
        return load_punkt_params(nltk.data.find("tokenizers/punkt_tab/english/"))
    except (LookupError, OSError, ValueError):
        pass
    params = PunktParameters()
    params.abbrev_types = set(_ABBREVIATIONS)
    params.sent_starters = set(_SENT_STARTERS)
    return params


def _punkt() -> Any:
    """NLTK's ``PunktSentenceTokenizer`` with our parameters, its patterns unwrapped."""
    from nltk.tokenize import punkt

    class LanguageVars(punkt.PunktLanguageVars):
        __slots__ = ()
        re_boundary_realignment = _bare(punkt.PunktLanguageVars.re_boundary_realignment)

        def period_context_re(self) -> Any:
            return _bare(super().period_context_re())

        def _word_tokenizer_re(self) -> Any:
            return _bare(super()._word_tokenizer_re())

    patterns = {n: _bare(getattr(punkt.PunktToken, n)) for n in dir(punkt.PunktToken)
                if n.startswith("_RE_")}
    token = type("Token", (punkt.PunktToken,), {"__slots__": (), **patterns})
    return punkt.PunktSentenceTokenizer(punkt_parameters(), lang_vars=LanguageVars(),
                                        token_cls=token)


class _EnglishTokenizer:
    """NLTK's ``word_tokenize`` without downloaded data: Punkt with our parameters, then the
    ``NLTKWordTokenizer`` steps run in NLTK's order, skipping steps that cannot match."""

    def __init__(self) -> None:
        from nltk.tokenize.destructive import NLTKWordTokenizer as Word

        self._punkt = _punkt()
        head = (*Word.STARTING_QUOTES, *Word.PUNCTUATION, Word.PARENS_BRACKETS, Word.DOUBLE_DASHES)
        self._head = [_step(p, r) for p, r in head]
        self._tail = [_step(p, r) for p, r in Word.ENDING_QUOTES]
        contractions = (*Word.CONTRACTIONS2, *Word.CONTRACTIONS3)
        self._contractions = [_step(p, r" \1 \2 ")[1:] for p in contractions]
        self._contraction_guard = _contraction_guard(contractions)

    def sentences(self, text: str) -> list[str]:
        """Punkt's sentences; a text with no sentence-end mark before its end is one."""
        stripped = text.rstrip()
        if not stripped:
            return []
        if _SENT_END.search(stripped, 0, len(stripped) - 1) is None:
            return [stripped]
        return self._punkt.tokenize(text)

    def words(self, sentence: str) -> list[str]:
        """``NLTKWordTokenizer().tokenize(sentence)``, step for step."""
        present = set(sentence)
        if not _QUOTES.isdisjoint(present):
            present |= _INSERTED
        sentence = _apply(self._tail, f" {_apply(self._head, sentence, present)} ", present)
        if self._contraction_guard is None or self._contraction_guard(sentence):
            for sub, replacement in self._contractions:
                sentence = sub(replacement, sentence)
        return sentence.split()

    def tokenize(self, text: str) -> list[str]:
        sentences = self.sentences(text)
        if len(sentences) == 1:
            return self.words(sentences[0])
        return [word for sentence in sentences for word in self.words(sentence)]


_BUILD_LOCK = threading.Lock()


@functools.cache
def _english() -> _EnglishTokenizer:
    with _BUILD_LOCK:  # built once even when a warm-up thread and a scorer race for it
        return _english_once()


@functools.cache
def _english_once() -> _EnglishTokenizer:
    return _EnglishTokenizer()


def warm_up() -> None:
    """Build the English tokenizer now (importing nltk takes ~0.4 s of CPU); the runner does
    this in a background thread while the first requests are in flight."""
    _english()


@functools.cache
def _jieba() -> Callable[[str], Any]:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba.cut


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _jieba_words(text: str) -> tuple[str, ...]:
    return tuple(_jieba()(text))


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _english_words(text: str) -> tuple[str, ...]:
    return tuple(_english().tokenize(text))


def contains_chinese(text: str) -> bool:
    """True when ``text`` holds a CJK ideograph in U+4E00..U+9FA5 (EvalScope's test).

    >>> contains_chinese("a 猫"), contains_chinese("a cat")
    (True, False)
    """
    return _CHINESE.search(text) is not None


def bleu_tokens(text: str) -> list[str]:
    """The tokens BLEU compares: ``jieba.cut`` for Chinese text (whitespace runs are tokens
    too), NLTK ``word_tokenize`` semantics otherwise.

    >>> bleu_tokens("Mr. Smith didn't go. It rained!")
    ['Mr.', 'Smith', 'did', "n't", 'go', '.', 'It', 'rained', '!']
    >>> bleu_tokens("我爱北京天安门")
    ['我', '爱', '北京', '天安门']
    """
    return list(bleu_words(text))


def bleu_words(text: str) -> tuple[str, ...]:
    return _jieba_words(text) if contains_chinese(text) else _english_words(text)


# rouge_chinese's sentence cut, in its order: (pattern, a literal any match contains)
_END_MARKS = re.compile("[。！？?]")
_CUT_SENT = (
    (re.compile("([。！？?])([^”’])"), None),
    (re.compile("(\\.{6})([^”’])"), "......"),
    (re.compile("(…{2})([^”’])"), "……"),
    (re.compile("([。！？?][”’])([^，。！？?])"), None),
)


def rouge_words(text: str) -> list[str]:
    """rouge_chinese's tokens: sentence cut (a newline after 。！？? ...), pieces whitespace
    normalised, then split on single spaces (so a blank piece yields one empty token)."""
    end_marks = _END_MARKS.search(text) is not None  # the cut only ever inserts newlines
    for pattern, literal in _CUT_SENT:
        if (literal in text) if literal else end_marks:
            text = pattern.sub("\\1\n\\2", text)
    words: list[str] = []
    for piece in text.rstrip().split("\n"):
        if piece:
            words.extend(piece.split() or [""])
    return words


def rouge_tokens(text: str) -> list[str]:
    """The tokens ROUGE compares (empty for an empty or whitespace-only text).

    >>> rouge_tokens("The cat, it sat.")
    ['The', 'cat,', 'it', 'sat.']
    >>> rouge_tokens("我爱北京。你好")
    ['我', '爱', '北京', '。', '你好']
    """
    if contains_chinese(text):
        text = " ".join(_jieba_words(text))
    return rouge_words(text)
