"""Tokenizers of the text metrics, compatible with EvalScope's.

BLEU tokens are NLTK ``word_tokenize`` semantics for English (Punkt sentence split, then
``NLTKWordTokenizer`` per sentence, reproduced without downloaded data) and ``jieba.cut`` for
any text holding a CJK ideograph in U+4E00..U+9FA5. ROUGE tokens are rouge_chinese's: its
sentence cut, then whitespace split; Chinese text is first segmented by jieba and joined with
spaces. Tokenizers are built once, lazily (neither nltk nor jieba is imported until a text
needs it), and token lists are cached per text (texts up to ``CACHED_CHARS`` characters, at most
``CACHE_BYTES`` of them).

The English word tokenizer (NLTK semantics without downloaded data) is ``english.py``.
"""

from __future__ import annotations

import functools
import logging
import re
import sys
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from groundscope.scoring.english import english as _english
from groundscope.scoring.english import punkt_parameters  # re-exported: part of this API

__all__ = ["bleu_tokens", "bleu_words", "contains_chinese", "punkt_parameters", "rouge_tokens",
           "rouge_words", "warm_chinese"]

_CHINESE = re.compile("[\u4e00-\u9fa5]")
# Token lists are cached per text, for references and answers met again (and a Chinese
# text's jieba words serve both its BLEU and its ROUGE). The caches are bounded by the size
# of what they hold (:func:`_held_bytes`), not by a count: 4,096 answers of 52 KB held
# ~2 GB. Texts longer than CACHED_CHARS are tokenized each time they are scored.
CACHE_BYTES = 4 << 20  # each cache: an English and a Chinese one
CACHED_CHARS = 1 << 16


def _held_bytes(text: str, tokens: tuple[str, ...]) -> int:
    """An estimate of the bytes a cached entry holds, on the generous side: its key (the
    text), the tokens (their characters again, at the text's width, and 96 bytes each for
    a ``str`` header and a pointer: a wide string's header is 74) and the cache's own ~600
    bytes an entry. Measured with ``tracemalloc`` on full caches of English, Chinese, emoji
    and mostly-whitespace texts, 1 to 6,000 tokens each: 0.41-0.96x the estimate."""
    return 640 + 2 * sys.getsizeof(text) + 96 * len(tokens)


@functools.cache
def _jieba() -> Callable[[str], Any]:
    import jieba

    jieba.setLogLevel(logging.WARNING)
    jieba.initialize()
    return jieba.cut


def warm_chinese() -> None:
    """Load jieba's dictionary now (~0.7 s of CPU). The runner calls this in a background
    thread as soon as a loaded record's reference holds Chinese, so the first Chinese score
    does not stall the event loop; a scorer that gets there first waits on jieba's own lock."""
    _jieba()


def _jieba_words(text: str) -> tuple[str, ...]:
    return _jieba_cached(text) if len(text) <= CACHED_CHARS else tuple(_jieba()(text))


def _english_words(text: str) -> tuple[str, ...]:
    return _english_cached(text) if len(text) <= CACHED_CHARS else tuple(_english().tokenize(text))


class _SizedCache:
    """Token lists by text, least recently used dropped first once their estimated size
    (:func:`_held_bytes`) is over ``limit``; a list over a quarter of it is not kept.

    By hand on an ``OrderedDict`` (C): cachetools' ``LRUCache`` with a ``getsizeof`` cost
    16.7 us a miss and 2.7 us a hit against 6.4 and 1.0 with ``functools.lru_cache``
    (40,000 short English texts; two misses a sample, ~2 % of a sample's client CPU); this
    costs 8.3-8.8 and 1.3."""

    def __init__(self, tokenize: Callable[[str], tuple[str, ...]], limit: int) -> None:
        self._tokenize = tokenize
        self._limit = limit
        self._items: OrderedDict[str, tuple[tuple[str, ...], int]] = OrderedDict()
        self._size = 0
        self._lock = threading.Lock()

    def __call__(self, text: str) -> tuple[str, ...]:
        found = self._items.get(text)  # (each OrderedDict call is atomic: no lock to read)
        if found is not None:
            try:  # noqa: SIM105  (contextlib.suppress costs more than the move)
                self._items.move_to_end(text)
            except KeyError:  # dropped by another thread meanwhile
                pass
            return found[0]
        tokens = self._tokenize(text)  # outside the lock: another text may be tokenized meanwhile
        size = _held_bytes(text, tokens)
        if size <= self._limit // 4:
            with self._lock:
                old = self._items.pop(text, None)
                self._size += size - (old[1] if old else 0)
                self._items[text] = (tokens, size)
                while self._size > self._limit:
                    self._size -= self._items.popitem(last=False)[1][1]
        return tokens


_jieba_cached = _SizedCache(lambda text: tuple(_jieba()(text)), CACHE_BYTES)
_english_cached = _SizedCache(lambda text: tuple(_english().tokenize(text)), CACHE_BYTES)


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
    if "\n" not in text:  # one piece: its split (rstrip and split agree on whitespace)
        return text.split()
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
