"""Answer normalisation for the consistency metric (pure): a different *format* is not a
different *answer*.

:func:`normalise_answer` maps an answer to a canonical text, in this order:

1. Unicode NFKC, lower case;
2. ``%`` becomes the word ``percent``; thousands separators go (``1,000`` -> ``1000``);
   apostrophes are deleted (``isn't`` -> ``isnt``); every other punctuation mark becomes a
   space, except a decimal point between digits (``3.5`` stays);
3. the articles ``a``, ``an``, ``the`` are dropped;
4. runs of number words become digits (``two`` -> ``2``, ``twenty-one`` -> ``21``,
   ``one hundred and five`` -> ``105``); a run of more than 12 number words stays words;
5. a whole answer that is a yes / no form (``yeah``, ``yep``, ``correct``, ``yes it is``;
   ``nope``, ``no there isnt``) becomes ``yes`` / ``no``.

:func:`closed_form` says whether a normalised answer is a closed one (``yes``, ``no`` or a
number): two different closed forms are different answers without asking a judge; any
other pair of different normalised answers is free-form and needs a semantic check.

>>> normalise_answer("Two.") == normalise_answer("2")
True
>>> normalise_answer("Yes, it is!"), normalise_answer("No."), normalise_answer("The Red Car")
('yes', 'no', 'red car')
"""

from __future__ import annotations

import re
import unicodedata

_UNITS = {w: i for i, w in enumerate([
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
    "eleven", "twelve", "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen",
    "nineteen"])}
_TENS = {w: 10 * (i + 2) for i, w in enumerate(
    ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"])}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 1_000_000}
_MAX_NUMBER_WORDS = 12  # "nine hundred ninety nine thousand nine hundred ninety nine" has 9
_ARTICLES = frozenset({"a", "an", "the"})
_YES = frozenset({"yes", "yeah", "yep", "yup", "true", "correct", "right", "affirmative", "sure",
                  "certainly", "definitely", "indeed"})
_NO = frozenset({"no", "nope", "nah", "false", "incorrect", "wrong", "negative"})
_YES_FILLER = frozenset({"it", "is", "does", "do", "there", "they", "are", "can", "i", "yes",
                         "indeed", "definitely", "certainly", "of", "course", "has", "have"})
_NO_FILLER = frozenset({"it", "is", "isnt", "does", "doesnt", "do", "dont", "there", "they",
                        "are", "arent", "can", "cant", "cannot", "not", "i", "no", "has", "hasnt",
                        "have", "havent", "at", "all"})
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")
_APOSTROPHE = re.compile(r"['\u2019`]")
_PUNCT = re.compile(r"[^\w\s.]|_|(?<!\d)\.|\.(?!\d)")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def _is_number_word(word: str) -> bool:
    return word in _UNITS or word in _TENS or word in _SCALES


def _number_value(words: list[str]) -> int:
    total = current = 0
    for w in words:
        if w in _UNITS:
            current += _UNITS[w]
        elif w in _TENS:
            current += _TENS[w]
        elif w == "hundred":
            current = max(current, 1) * 100
        else:
            total += max(current, 1) * _SCALES[w]
            current = 0
    return total + current


def numbers_to_digits(words: list[str]) -> list[str]:
    """Runs of number words replaced by their digits (``and`` may join a run).

    A run of more than ``_MAX_NUMBER_WORDS`` number words is not a number anyone writes
    ("hundred hundred hundred ..."): it is kept as words, so a hostile answer cannot build
    an integer of thousands of digits (slow to build, and refused by ``str()``).

    >>> numbers_to_digits("one hundred and five apples and two pears".split())
    ['105', 'apples', 'and', '2', 'pears']
    """
    out: list[str] = []
    run: list[str] = []  # the current run as written, "and"s included
    for i, w in enumerate(words):
        joins = (w == "and" and run and i + 1 < len(words) and _is_number_word(words[i + 1]))
        if _is_number_word(w) or joins:
            run.append(w)
            continue
        if run:
            out += _run_to_digits(run)
            run = []
        out.append(w)
    if run:
        out += _run_to_digits(run)
    return out


def _run_to_digits(run: list[str]) -> list[str]:
    numbers = [w for w in run if w != "and"]
    if len(numbers) > _MAX_NUMBER_WORDS:
        return run
    return [str(_number_value(numbers))]


def _yes_no(words: list[str]) -> str | None:
    if not words:
        return None
    head, rest = words[0], words[1:]
    if head in _YES and all(w in _YES_FILLER for w in rest):
        return "yes"
    if head in _NO and all(w in _NO_FILLER for w in rest):
        return "no"
    if words in (["of", "course"], ["i", "think", "so"]):
        return "yes"
    return None


def normalise_answer(text: str) -> str:
    """The canonical form of an answer (see the module docstring).

    >>> normalise_answer("Twenty-one"), normalise_answer("1,000 people"), normalise_answer("3.5 m.")
    ('21', '1000 people', '3.5 m')
    >>> normalise_answer("Nope, there isn't."), normalise_answer("50%")
    ('no', '50 percent')
    """
    text = unicodedata.normalize("NFKC", text).lower().replace("%", " percent ")
    text = _APOSTROPHE.sub("", _THOUSANDS.sub("", text))
    text = _PUNCT.sub(" ", text)
    words = [w for w in text.replace("-", " ").split() if w not in _ARTICLES]
    words = numbers_to_digits(words)
    return _yes_no(words) or " ".join(words)


def closed_form(normalised: str) -> bool:
    """Whether a normalised answer is ``yes``, ``no`` or a number.

    >>> closed_form("yes"), closed_form("2"), closed_form("2 wheels")
    (True, True, False)
    """
    return normalised in ("yes", "no") or _NUMBER.fullmatch(normalised) is not None


def same_answer(a: str, b: str) -> bool | None:
    """Whether two normalised answers agree when that needs no judge, else None.

    Equal forms agree; two different closed forms (``yes``/``no``/numbers) disagree; any
    other difference is a question of meaning.

    >>> same_answer("2", "2"), same_answer("yes", "no"), same_answer("2", "2 wheels")
    (True, False, None)
    """
    if a == b:
        return True
    if closed_form(a) and closed_form(b):
        return False
    return None
