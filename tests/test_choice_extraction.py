"""Multiple-choice extraction: completions -> the option label read from them."""

from __future__ import annotations

import pytest

from groundscope.scoring.choice import extract_choice, option_letters, split_reasoning, strip_reasoning

ABCD = option_letters(4)
THIRTY = option_letters(30)  # A..Z, 1..4
FORTY = option_letters(40)  # A..Z, 1..14

CASES: list[tuple[str, str, tuple[str, ...], str | None]] = [
    # (id, completion, allowed labels, expected)
    ("plain marker", "Reasoning...\nANSWER: B", ABCD, "B"),
    ("last marker wins", "ANSWER: A\nWait, no.\nANSWER: C", ABCD, "C"),
    ("labels glued out of order are a word, not two labels", "ANSWER: C\nANSWER: BA", ABCD, "C"),
    ("marker case-insensitive", "so the final answer: D", ABCD, "D"),
    ("bold label", "ANSWER: **C**", ABCD, "C"),
    ("bold marker", "**Answer:** B", ABCD, "B"),
    ("bold around all", "**ANSWER: A**", ABCD, "A"),
    ("parentheses", "ANSWER: (D)", ABCD, "D"),
    ("square brackets", "ANSWER: [B]", ABCD, "B"),
    ("full-width parentheses", "ANSWER: （D）", ABCD, "D"),
    ("full-width lenticular", "ANSWER: 【B】", ABCD, "B"),
    ("full-width colon", "ANSWER：C", ABCD, "C"),
    ("trailing period", "ANSWER: C.", ABCD, "C"),
    ("latex boxed", "ANSWER: $\\boxed{A}$", ABCD, "A"),
    ("lowercase after marker", "answer: c", ABCD, "C"),
    ("lowercase in brackets with period", "Answer: (b).", ABCD, "B"),
    ("lowercase article is not a label", "Answer: a dog, which is option B", ABCD, "B"),
    ("label then prose", "ANSWER: B, not C", ABCD, "B"),
    ("echoed placeholder skipped", "Format: 'ANSWER: [LETTER]'. ANSWER: D", ABCD, "D"),
    ("placeholder only, fallback", "ANSWER: [LETTER] I pick B", ABCD, "B"),
    ("two labels is no answer", "ANSWER: A, C", ABCD, None),
    ("glued labels is no answer", "ANSWER: AC", ABCD, None),
    ("labels joined by and", "ANSWER: B and D", ABCD, None),
    ("labels joined by a space", "ANSWER: A B", ABCD, None),
    ("a word after the label is not a label", "ANSWER: B I think", ABCD, "B"),
    ("chinese marker", "答案：【C】", ABCD, "C"),
    ("list then prose", "ANSWER: B, C is wrong", ABCD, None),
    ("bracketed then prose", "ANSWER: (A) or maybe (C)", ABCD, "A"),
    ("word of label letters", "ANSWER: BAD", ABCD, None),
    ("list on the next line is not a list", "ANSWER: B,\nC was tempting", ABCD, "B"),
    ("think block ignored", "<think>ANSWER: A</think>\nANSWER: B", ABCD, "B"),
    ("marker only inside think", "<think>so ANSWER: A</think>I choose (C).", ABCD, "C"),
    ("orphan closing think", "ANSWER: A maybe...</think>ANSWER: D", ABCD, "D"),
    ("unclosed think cut off", "ANSWER: B <think>hmm, ANSWER: C", ABCD, "B"),
    ("think tag with attributes", '<think signature="x">ANSWER: A</think>C', ABCD, "C"),
    ("reasoning marker when the reply has none", "<think>ANSWER: B</think>ANSWER: [LETTER]", ABCD, "B"),
    ("orphan reasoning marker when the reply has none", "ANSWER: B</think>ANSWER: [LETTER]", ABCD, "B"),
    ("last reasoning marker, in text order",
     "ANSWER: A</think>so<think>ANSWER: D</think>ANSWER: [LETTER]", ABCD, "D"),
    ("marker in cut-off reasoning", "<think>so ANSWER: C, I guess", ABCD, "C"),
    ("reply letter beats a reasoning marker", "so ANSWER: A</think>I choose (C).", ABCD, "C"),
    ("no letter guessed from reasoning", "I think B is right</think>", ABCD, None),
    ("no letter guessed from cut-off reasoning", "<think>B looks right", ABCD, None),
    ("several labels in the reply: reasoning unread", "ANSWER: B</think>ANSWER: A, C", ABCD, None),
    ("no marker, last standalone letter", "A is wrong; the right one is B.", ABCD, "B"),
    ("no marker, letter glued to Chinese", "因此选C。", ABCD, "C"),
    # found by mutation testing (mutmut): each case fails with its mutant applied
    ("a lower-case letter that is no option is not read", "B looks right.\nANSWER: e", ABCD, "B"),
    ("glued labels after an earlier answer are no answer", "ANSWER: B\nANSWER: AC", ABCD, None),
    ("a <think without > is text, not a tag", "C. <think ANSWER: A", ABCD, "A"),
    ("an orphan closing tag after a block", "<think>a</think>B</think>C", ABCD, "C"),
    ("a block right after an orphan closing tag", "ANSWER: A</think><think>x</think>B", ABCD, "B"),
    ("an orphan's reasoning, then a block's, in text order",
     "ANSWER: D</think><think>ANSWER: A</think>ANSWER: [LETTER]", ABCD, "A"),
    ("no marker, letter inside word ignored", "B looks right, says GPT", ABCD, "B"),
    ("marker label not allowed, fallback", "Option C. ANSWER: E", ABCD, "C"),
    ("letter not allowed anywhere", "ANSWER: F", ABCD, None),
    ("no letter at all", "I do not know.", ABCD, None),
    ("empty text", "", ABCD, None),
    ("past Z: number label", "ANSWER: 3", THIRTY, "3"),
    ("past Z: number out of range", "ANSWER: 5", THIRTY, None),
    ("past Z: two-digit label", "Options 1 and 2 fail. ANSWER: (12)", FORTY, "12"),
    ("past Z: letter still works", "ANSWER: Z", THIRTY, "Z"),
    ("past Z: digits not a fallback", "my pick is 2", THIRTY, None),
]


@pytest.mark.parametrize(
    ("completion", "allowed", "expected"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_extract_choice(completion: str, allowed: tuple[str, ...], expected: str | None) -> None:
    assert extract_choice(completion, allowed) == expected


def test_option_letters_numbering() -> None:
    assert option_letters(0) == ()
    assert option_letters(26)[-1] == "Z"
    assert option_letters(27)[-1] == "1"  # EvalScope: answer_character(26) == "1"
    assert option_letters(40)[-1] == "14"
    assert len(set(option_letters(100))) == 100
    with pytest.raises(ValueError):
        option_letters(-1)


def test_strip_reasoning() -> None:
    assert strip_reasoning("<THINK>x</THINK> y") == " y"
    assert strip_reasoning("a<think>b</think>c<think>d</think>e") == "ace"
    assert strip_reasoning("plain") == "plain"


def test_split_reasoning() -> None:
    assert split_reasoning("plan</think>A<think>x</think>B<think>cut") == ("AB", "plan\nx\ncut")
    assert split_reasoning("a<think>b</think>c") == ("ac", "b")
    assert split_reasoning("plain") == ("plain", "")


def test_any_sequence_of_labels() -> None:
    assert extract_choice("ANSWER: B", "ABCD") == "B"
    assert extract_choice("ANSWER: B", []) is None

