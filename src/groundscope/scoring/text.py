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

Speed: scores are counted here (n-gram sets; Counters only when both sides repeat an
n-gram; a bit-parallel LCS), not by calling NLTK or rouge_chinese. English words come from
NLTK's own ``NLTKWordTokenizer`` patterns, read from the installed NLTK and applied in its
order, skipping a step when the characters it needs are absent (a pattern we do not know
always runs); Punkt's sentence loop runs in ``groundscope.scoring.tokenize``, which lists
its shortcuts (each exact). nltk and jieba are imported on first use; token lists are
cached per text (LRU bounded by size: ``tokenize.CACHE_BYTES``; texts up to 64 K characters,
so hostile multi-megabyte answers are not kept).

Output keys
-----------
``bleu``: ``bleu-1``, ``bleu-2``, ``bleu-3``, ``bleu-4``.
``rouge``: ``rouge-{1,2,l}-{r,p,f}`` (recall, precision, F1), nine keys in that order.
All values are floats in [0, 1].

Known differences from EvalScope
--------------------------------
* **better**: an empty (or whitespace-only) prediction or reference scores 0 on every ROUGE
  key instead of raising inside rouge_chinese.
* Punkt: NLTK's trained English model (``punkt_tab``) is a download we cannot ship. When it
  is installed (``python -m nltk.downloader punkt_tab``) it is used and tokens match
  EvalScope exactly; otherwise the sentence splitter is NLTK's ``PunktSentenceTokenizer`` with
  parameters written here
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

import math
import sys
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from typing import Any

from groundscope.defaults import DEFAULT_MAX_RESPONSE_BYTES
from groundscope.scoring.base import TooLongToScore
from groundscope.scoring.tokenize import (
    bleu_tokens,
    bleu_words,
    contains_chinese,
    punkt_parameters,
    rouge_tokens,
)

__all__ = [
    "BLEU_KEYS", "LCS_MAX_PAIRS", "ROUGE_KEYS", "TooLongToScore", "best_over_references", "bleu",
    "bleu_tokens", "contains_chinese", "lcs_length", "punkt_parameters", "rouge", "rouge_tokens",
]

BLEU_KEYS: tuple[str, ...] = ("bleu-1", "bleu-2", "bleu-3", "bleu-4")
ROUGE_KEYS: tuple[str, ...] = tuple(
    f"rouge-{n}-{s}" for n in ("1", "2", "l") for s in ("r", "p", "f")
)


def _ngrams(tokens: Sequence[str], n: int) -> Sequence[Any]:
    if n == 1:
        return tokens
    if n == 2:
        return list(pairwise(tokens))
    return list(zip(*(tokens[i:] for i in range(n)), strict=False))


def _clipped_matches(hyp: Sequence[Any], ref: Sequence[Any]) -> int:
    """Sum over the n-grams of ``hyp`` of min(count in hyp, count in ref) (NLTK's clipped
    count); sets suffice unless both sides repeat an n-gram."""
    hyp_set, ref_set = set(hyp), set(ref)
    common = hyp_set & ref_set
    if not common or len(hyp_set) == len(hyp) or len(ref_set) == len(ref):
        return len(common)
    hyp_counts, ref_counts = Counter(hyp), Counter(ref)
    return sum(min(hyp_counts[gram], ref_counts[gram]) for gram in common)


def _bleu_from_tokens(hyp: Sequence[str], ref: Sequence[str]) -> dict[str, float]:
    hyp_len, ref_len = len(hyp), len(ref)
    if hyp_len == 0:
        return dict.fromkeys(BLEU_KEYS, 0.0)
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    scores: dict[str, float] = {}
    matches = 1
    for n, key in enumerate(BLEU_KEYS, start=1):
        # no matching (n-1)-gram means no matching n-gram: skip the counting
        if matches and hyp_len >= n:
            matches = _clipped_matches(_ngrams(hyp, n), _ngrams(ref, n))
            total = hyp_len - n + 1
        else:
            matches, total = 0, 1
        if n == 1 and matches == 0:
            return dict.fromkeys(BLEU_KEYS, 0.0)
        precision = matches / total if matches else sys.float_info.min
        scores[key] = bp * math.exp(math.log(precision))  # NLTK's log-space arithmetic
    return scores


# BLEU and ROUGE hold every token of both texts and their n-grams at once: ~40 bytes of
# memory a character (a 20 MB answer read back by `groundscope score` peaked at 812 MB).
# Texts up to the default reply cap (4 Mi characters) are scored: any answer a run with the
# default `max_response_bytes` receives; a longer one (a crafted or edited predictions
# file, a raised cap) is not, its score an error.
MAX_SCORED_CHARS = DEFAULT_MAX_RESPONSE_BYTES


def _within_bound(metric: str, prediction: str, reference: str) -> None:
    for side, text in (("answer", prediction), ("reference", reference)):
        if len(text) > MAX_SCORED_CHARS:
            raise TooLongToScore(f"{metric}: the {side} has {len(text):,} characters, more "
                                 f"than its limit of {MAX_SCORED_CHARS:,}")


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
    _within_bound("BLEU", prediction, reference)
    return _bleu_from_tokens(bleu_words(prediction), bleu_words(reference))


# ROUGE-L's LCS costs |hyp| x |ref| / 30 machine-word operations, whatever the algorithm (no
# subquadratic one exists in general), and its bit masks up to |distinct ref tokens| x |hyp|
# bits. Beyond this many token pairs (~1 s of CPU, <= 128 MiB of masks) a pair is not
# scored: two multi-megabyte texts would otherwise take minutes. A long answer against a
# short reference (the usual case) stays far below it: 1,000,000 x 1,000 tokens is allowed.
LCS_MAX_PAIRS = 2**30


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, bit-parallel (Allison-Dix / Hyyrö):
    one big-integer update per token of the shorter sequence.

    The bit masks (positions in the longer sequence) are made only for tokens of the
    shorter one, in time linear in the longer length (:func:`_bit_masks`): growing a mask
    for every token bit by bit was quadratic in it (36 s for a 4 MB answer of distinct words).
    ``TooLongToScore`` beyond :data:`LCS_MAX_PAIRS` token pairs.

    >>> lcs_length("the cat is on the mat".split(), "the cat sat on the mat".split())
    5
    """
    if len(a) < len(b):
        a, b = b, a
    if len(a) * len(b) > LCS_MAX_PAIRS:
        raise TooLongToScore(f"ROUGE-L would compare {len(b):,} x {len(a):,} tokens, more "
                             f"than its limit of {LCS_MAX_PAIRS:,} token pairs")
    masks = _bit_masks(a, set(b))
    full = (1 << len(a)) - 1
    row = full
    for token in b:
        match = masks.get(token)
        if match is not None:
            hit = row & match
            row = ((row + hit) | (row - hit)) & full
    return len(a) - row.bit_count()


def _bit_masks(a: Sequence[str], wanted: set[str]) -> dict[str, int]:
    """For each token of ``wanted`` in ``a``, the integer whose bit i is set where ``a[i]``
    is that token. Up to ``_SHIFT_WIDTH`` tokens, bits are or-ed in (each step costs its
    width: fine while that is a few machine words); beyond, each mask is made once from its
    positions in a byte array, so the work stays linear in ``len(a)``."""
    masks: dict[str, int] = {}
    if len(a) <= _SHIFT_WIDTH:
        for i, token in enumerate(a):
            if token in wanted:
                masks[token] = masks.get(token, 0) | (1 << i)
        return masks
    positions: dict[str, list[int]] = {}
    for i, token in enumerate(a):
        if token in wanted:
            positions.setdefault(token, []).append(i)
    size = (len(a) + 7) // 8
    for token, where in positions.items():
        bits = bytearray(size)
        for i in where:
            bits[i >> 3] |= 1 << (i & 7)
        masks[token] = int.from_bytes(bits, "little")
    return masks


_SHIFT_WIDTH = 1024


def _f1(precision: float, recall: float) -> float:
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def _overlap(hyp: set[Any], ref: set[Any]) -> tuple[float, float, float]:
    """ROUGE-N recall, precision and F1 of unique n-grams."""
    overlap = len(hyp & ref)
    precision = overlap / len(hyp) if hyp else 0.0
    recall = overlap / len(ref) if ref else 0.0
    return recall, precision, _f1(precision, recall)


def _rouge_from_tokens(hyp: Sequence[str], ref: Sequence[str]) -> dict[str, float]:
    if not hyp or not ref:
        return dict.fromkeys(ROUGE_KEYS, 0.0)
    one = _overlap(set(hyp), set(ref))
    two = _overlap(set(pairwise(hyp)), set(pairwise(ref)))
    common = lcs_length(ref, hyp)
    recall, precision = common / len(ref), common / len(hyp)
    return dict(zip(ROUGE_KEYS, (*one, *two, recall, precision, _f1(precision, recall)), strict=True))


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
    _within_bound("ROUGE", prediction, reference)
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
