"""BLEU-1..4 and ROUGE-1/2/L between a prediction and a reference (EvalScope compatible).

References
----------
* BLEU (Papineni et al., 2002) as computed per sentence by ``nltk.translate.bleu_score.
  sentence_bleu`` with the one-hot weights EvalScope uses: ``bleu-n`` is the clipped
  ("modified") n-gram precision of order *n alone* times the brevity penalty
  ``BP = 1 if len(hyp) > len(ref) else exp(1 - len(ref)/len(hyp))``; no smoothing,
  case-sensitive. NLTK edge cases are kept: an empty hypothesis or one without a single
  matching unigram scores 0 on every order; a zero precision of some order *n* (including
  a hypothesis shorter than *n*) becomes ``sys.float_info.min``, so e.g. ``bleu-4`` without a
  matching 4-gram is ``BP * 2.2e-308`` (displayed as 0).
* ROUGE (Lin, 2004) as computed by ``rouge_chinese.Rouge().get_scores(p, r,
  ignore_empty=True)``: ROUGE-1/2 count *unique* n-grams (sets), ROUGE-L uses the longest
  common subsequence of the whole token sequences; ``r = overlap / |ref|``,
  ``p = overlap / |hyp|``, ``f = 2 * p * r / (p + r + 1e-8)``.

Tokenization (as EvalScope does it)
-----------------------------------
A text "is Chinese" when it holds a character in U+4E00..U+9FA5; prediction and reference
are judged separately. BLEU tokens: ``jieba.cut`` for Chinese, else NLTK's ``word_tokenize``
(Punkt sentence split, then ``NLTKWordTokenizer`` per sentence). ROUGE tokens: Chinese is
first re-written as ``" ".join(jieba.cut(text))``; then rouge_chinese's sentence cut and a
whitespace split (punctuation stays attached to English words).

Output keys
-----------
``bleu``: ``bleu-1``, ``bleu-2``, ``bleu-3``, ``bleu-4``.
``rouge``: ``rouge-{1,2,l}-{r,p,f}`` (recall, precision, F1), nine keys in that order.
All values are floats in [0, 1].

Known differences from EvalScope
--------------------------------
* **better**: an empty (or whitespace-only) prediction or reference scores 0 on every ROUGE
  key instead of raising inside rouge_chinese.
* Punkt: NLTK's trained English model (``punkt_tab``) is a download we cannot ship, so the
  sentence splitter is NLTK's ``PunktSentenceTokenizer`` with parameters written here
  (common abbreviations and sentence starters, no collocations, no orthographic
  statistics). Only a period-final token in the middle of a text can differ: where the
  trained model knows an abbreviation we do not (or uses its statistics to end a sentence
  after an abbreviation), one token reads ``"Abbr."`` on one side and ``"Abbr", "."`` on the
  other.

Example
-------
>>> s = bleu("the cat sat on the mat", "the cat is on the mat")
>>> [round(s[k], 6) for k in ("bleu-1", "bleu-2", "bleu-3")], s["bleu-4"] < 1e-300
([0.833333, 0.6, 0.25], True)
>>> r = rouge("the cat sat on the mat", "the cat is on the mat")
>>> round(r["rouge-1-r"], 6), round(r["rouge-l-f"], 6)
(0.8, 0.833333)
"""

from __future__ import annotations

import functools
import logging
import math
import re
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["best_over_references", "bleu", "bleu_tokens", "rouge", "rouge_tokens"]

BLEU_KEYS: tuple[str, ...] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4")
ROUGE_KEYS: tuple[str, ...] = tuple(
    f"rouge-{n}-{s}" for n in ("1", "2", "l") for s in ("r", "p", "f")
)


def _word_set(words: str) -> frozenset[str]:
    return frozenset(words.split())


_CHINESE = re.compile("[\u4e00-\u9fa5]")
_CACHE_SIZE = 4096

# Abbreviations (lower case, final period removed) that do not end a sentence. Ours, kept
# to unambiguous forms: words that also end sentences ("no", "sat", "mar") are left out.
_ABBREVIATIONS = _word_set(
    "mr mrs ms dr prof sr jr st mt ft vs etc e.g i.e cf al approx a.m p.m u.s u.k u.n u.s.a "
    "inc ltd co corp dept univ assn bros jan feb apr aug sept oct nov dec gen gov sen rep "
    "capt col lt sgt rev messrs fig vol pp ph.d ave blvd"
)
# Capitalised words that start a new sentence after an abbreviation or an ellipsis.
_SENT_STARTERS = _word_set(
    "the a an this that these those it its he she we they i you there but and however in "
    "on at for if when while after before as so his her their our my what why how also "
    "then yet still although because since"
)

# Per NLTKWordTokenizer pattern: characters one of which any match must contain. A step
# whose characters are absent is skipped (an unknown pattern always runs).
_STEP_GUARDS: Mapping[str, str] = {
    "([«“‘„]|[`]+)": "[«“‘„`]",
    '^\\"': '"',
    "(``)": "`",
    "([ \\(\\[{<])(\\\"|\\'{2})": "[\"']",
    "(?i)(?<!\\w)(\\')(?!(?:re|ve|ll|m|t|s|d|n)\\b)(?=\\w)": "'",
    "([^\\.])(\\.)([\\]\\)}>\"\\'»”’ ]*+)\\s*$": "\\.",
    "([:,])([^\\d])": "[:,]",
    "([:,])$": "[:,]",
    "\\.{2,}": "\\.",
    "[;@#$%&]": "[;@#$%&]",
    "[\\u2012-\\u2015]": "[\u2012-\u2015]",
    "([^\\.])(\\.)([\\]\\)}>\"\\']*)\\s*$": "\\.",
    "[?!]": "[?!]",
    "([^'])' ": "'",
    "[*]": "[*]",
    "[\\]\\[\\(\\)\\{\\}\\<\\>]": "[][(){}<>]",
    "--": "-",
    "([»”’])": "[»”’]",
    "''": "'",
    '"': '"',
    "([^' ])('[sS]|'[mM]|'[dD]|') ": "'",
    "([^' ])('ll|'LL|'re|'RE|'ve|'VE|n't|N'T) ": "'",
}
# Contractions are written "(?i)...(can)(?#X)(not)..." in NLTK: the two groups, joined, are
# a literal that any match contains.
_CONTRACTION = re.compile(r"\(([\w']+)\)\(\?#X\)\(([\w']+)\)")
_SENT_END = re.compile(r"[.?!]")

Guard = Callable[[str], object]
Step = tuple[Guard | None, Callable[..., str], str]


def _guard_for(source: str) -> Guard | None:
    """A cheap test that is false only when ``source`` cannot match the text."""
    if source in _STEP_GUARDS:
        return re.compile(_STEP_GUARDS[source]).search
    found = _CONTRACTION.search(source)
    if found and source.startswith("(?i)"):
        literal = (found.group(1) + found.group(2)).lower()
        return lambda text: not text.isascii() or literal in text.lower()
    return None


def _step(pattern: Any, replacement: str) -> Step:
    compiled = getattr(pattern, "_rx", pattern)  # NLTK's own engine, minus its timeout wrapper
    return (_guard_for(compiled.pattern), compiled.sub, replacement)


class _EnglishTokenizer:
    """NLTK's ``word_tokenize`` without downloaded data: Punkt with our parameters, then the
    ``NLTKWordTokenizer`` steps run in NLTK's order, skipping steps that cannot match."""

    def __init__(self) -> None:
        from nltk.tokenize.destructive import NLTKWordTokenizer as Word
        from nltk.tokenize.punkt import PunktParameters, PunktSentenceTokenizer

        params = PunktParameters()
        params.abbrev_types = set(_ABBREVIATIONS)
        params.sent_starters = set(_SENT_STARTERS)
        self._punkt = PunktSentenceTokenizer(params)
        head = (*Word.STARTING_QUOTES, *Word.PUNCTUATION, Word.PARENS_BRACKETS, Word.DOUBLE_DASHES)
        self._head = [_step(p, r) for p, r in head]
        contractions = (*Word.CONTRACTIONS2, *Word.CONTRACTIONS3)
        self._tail = [_step(p, r) for p, r in Word.ENDING_QUOTES]
        self._tail += [_step(p, r" \1 \2 ") for p in contractions]

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
        for guard, sub, replacement in self._head:
            if guard is None or guard(sentence):
                sentence = sub(replacement, sentence)
        sentence = f" {sentence} "
        for guard, sub, replacement in self._tail:
            if guard is None or guard(sentence):
                sentence = sub(replacement, sentence)
        return sentence.split()

    def tokenize(self, text: str) -> list[str]:
        return [word for sentence in self.sentences(text) for word in self.words(sentence)]


@functools.cache
def _english() -> _EnglishTokenizer:
    return _EnglishTokenizer()


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
    if contains_chinese(text):
        return list(_jieba_words(text))
    return list(_english_words(text))


_CUT_SENT = tuple(
    re.compile(p) for p in ("([。！？?])([^”’])", "(\\.{6})([^”’])", "(…{2})([^”’])",
                            "([。！？?][”’])([^，。！？?])")
)
_CUT_TRIGGER = re.compile("[。！？?.…]")


def _rouge_words(text: str) -> list[str]:
    """rouge_chinese's tokens: sentence cut (a newline after 。！？? ...), pieces whitespace
    normalised, then split on single spaces (so a blank piece yields one empty token)."""
    if _CUT_TRIGGER.search(text):
        for pattern in _CUT_SENT:
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
    return _rouge_words(text)


def _ngrams(tokens: Sequence[str], n: int) -> Any:
    return tokens if n == 1 else zip(*(tokens[i:] for i in range(n)), strict=False)


def _bleu_from_tokens(hyp: Sequence[str], ref: Sequence[str]) -> dict[str, float]:
    zeros = dict.fromkeys(BLEU_KEYS, 0.0)
    hyp_len, ref_len = len(hyp), len(ref)
    if hyp_len == 0:
        return zeros
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    scores: dict[str, float] = {}
    for n, key in enumerate(BLEU_KEYS, start=1):
        matches, total = 0, 1
        if hyp_len >= n:
            counts = Counter(_ngrams(hyp, n))
            ref_counts = Counter(_ngrams(ref, n)) if ref_len >= n else Counter()
            matches = sum(min(c, ref_counts[g]) for g, c in counts.items() if g in ref_counts)
            total = hyp_len - n + 1
        if n == 1 and matches == 0:
            return zeros
        precision = matches / total if matches else sys.float_info.min
        scores[key] = bp * math.exp(math.log(precision))  # NLTK's log-space arithmetic
    return scores


def bleu(prediction: str, reference: str) -> dict[str, float]:
    """BLEU-1..4 of ``prediction`` against one ``reference``: keys ``bleu-1``..``bleu-4``.

    Equal to ``sentence_bleu([bleu_tokens(reference)], bleu_tokens(prediction),
    weights=w)`` with ``w`` = (1,0,0,0) .. (0,0,0,1), computed by plain counting.

    >>> s = bleu("我爱北京天安门", "我爱北京")
    >>> [round(s[k], 6) for k in ("bleu-1", "bleu-2", "bleu-3")]
    [0.75, 0.666667, 0.5]
    >>> bleu("dog", "Dog")
    {'bleu-1': 0.0, 'bleu-2': 0.0, 'bleu-3': 0.0, 'bleu-4': 0.0}
    """
    return _bleu_from_tokens(bleu_tokens(prediction), bleu_tokens(reference))


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison-Dix / Hyyrö):
    one big-integer update per token of the shorter sequence.

    >>> lcs_length("the cat is on the mat".split(), "the cat sat on the mat".split())
    5
    """
    if len(a) < len(b):
        a, b = b, a
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        match = masks.get(token)
        if match is not None:
            hit = row & match
            row = ((row + hit) | (row - hit)) & full
    return len(a) - row.bit_count()


def _f1(precision: float, recall: float) -> float:
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _rouge_from_tokens(hyp: Sequence[str], ref: Sequence[str]) -> dict[str, float]:
    if not hyp or not ref:
        return dict.fromkeys(ROUGE_KEYS, 0.0)
    scores: dict[str, float] = {}
    for n in (1, 2):
        hyp_set, ref_set = set(_ngrams(hyp, n)), set(_ngrams(ref, n))
        overlap = len(hyp_set & ref_set)
        precision = overlap / len(hyp_set) if hyp_set else 0.0
        recall = overlap / len(ref_set) if ref_set else 0.0
        scores.update({f"rouge-{n}-r": recall, f"rouge-{n}-p": precision,
                       f"rouge-{n}-f": _f1(precision, recall)})
    common = lcs_length(ref, hyp)
    recall, precision = common / len(ref), common / len(hyp)
    scores.update({"rouge-l-r": recall, "rouge-l-p": precision,
                   "rouge-l-f": _f1(precision, recall)})
    return scores


def rouge(prediction: str, reference: str) -> dict[str, float]:
    """ROUGE-1/2/L recall, precision and F1: keys ``rouge-{1,2,l}-{r,p,f}``.

    Equal to rouge_chinese's ``get_scores`` on the EvalScope-prepared texts, except that an
    empty or whitespace-only side gives 0 everywhere (rouge_chinese raises).

    >>> r = rouge("A dog is running in the park", "A dog runs in the park")
    >>> [round(r[k], 6) for k in ("rouge-1-r", "rouge-1-p", "rouge-1-f")]
    [0.833333, 0.714286, 0.769231]
    >>> rouge("", "anything")["rouge-l-r"]
    0.0
    """
    return _rouge_from_tokens(rouge_tokens(prediction), rouge_tokens(reference))


def best_over_references(
    fn: Callable[[str, str], Mapping[str, float]], prediction: str, references: Sequence[str]
) -> dict[str, float]:
    """Score ``prediction`` against each reference with ``fn`` and keep, per key, the best
    value (so ``bleu-1`` and ``bleu-4`` may come from different references). Raises
    ``ValueError`` when ``references`` is empty: there is nothing to compare with.

    >>> best_over_references(bleu, "a cat", ["a dog", "a cat"])["bleu-1"]
    1.0
    """
    if not references:
        raise ValueError("best_over_references needs at least one reference")
    results = [fn(prediction, reference) for reference in references]
    return {key: max(result[key] for result in results) for key in results[0]}
