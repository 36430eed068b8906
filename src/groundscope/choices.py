"""The labels of a multiple-choice question's options, the one rule shared by the dataset
formats (which label the options in the prompt) and by scoring (which reads the chosen
label back, ``scoring/choice.py``)."""

from __future__ import annotations

__all__ = ["option_letters"]


def option_letters(n: int) -> tuple[str, ...]:
    """The labels of ``n`` options: ``A``..``Z``, then ``"1"``, ``"2"``, ... (EvalScope's
    numbering: option 27 is ``"1"``).

    >>> option_letters(4)
    ('A', 'B', 'C', 'D')
    >>> option_letters(28)[-3:]
    ('Z', '1', '2')
    """
    if n < 0:
        raise ValueError(f"the number of options must be >= 0, got {n}")
    return tuple(chr(ord("A") + i) if i < 26 else str(i - 25) for i in range(n))
