"""EvalScope's own multiple-choice parsing cases, read by groundscope's extractor (issue 13 item 5).

The cases are those of EvalScope's ``tests/test_multi_choices.py`` (commit fde259d2, the
tests added with its PRs #1549, #1560 and #1597) that expect a single answer, in its
setup: four options, A-D. Each row names the EvalScope test it comes from; the texts are
written out here, not imported. Tests marked "zh" there call ``parse_answers_zh`` (EvalScope's
Chinese templates); groundscope reads the ``答案：`` marker in every reply, so the same rows
apply. Multiple-answer rows (``multiple_correct=True``) are left out: groundscope's
multiple-choice samples have one answer. The last rows are single-answer behaviour of
EvalScope's ``parse_answers`` not covered by its tests, checked against its code.

Where groundscope reads a text differently on purpose (README, "Where groundscope differs
from EvalScope on purpose"), the row is in ``DELIBERATE`` with EvalScope's result beside ours.
"""

from __future__ import annotations

import pytest

from groundscope.scoring.choice import extract_choice, option_letters

ABCD = option_letters(4)

ECHOED_FORMAT = (
    "We need answer physics. The last line should be of the format ANSWER: [LETTER].\n\n"
    "Energy conservation gives option B.\n\nNeed answer.</think>ANSWER: B"
)
WRAPPED = ["ANSWER: B", "ANSWER: (B)", "ANSWER: [B]", "ANSWER: **B**", "ANSWER: (B) 300",
           "### Final Answer: **(B) 300**"]
WRAPPED_ZH = ["答案：(B)", "答案：（B）", "答案：**B**", "答案：（B）36 千克"]
JUSTIFIED = ["B because it fits", "B is the correct choice", "B second option",
             "B - energy is conserved", "B; energy is conserved", "B because Energy is conserved",
             "B is correct per Newton", "B because option A is wrong", "B, not C",
             "B is correct, D is a distractor"]

# (EvalScope test, completion, expected label or None for "no answer")
CASES: list[tuple[str, str, str | None]] = [
    ("test_parse_answers_plain", "ANSWER: B", "B"),
    ("test_parse_answers_trailing_period_and_lowercase_keyword", "Some reasoning.\nANSWER: C.", "C"),
    ("test_parse_answers_trailing_period_and_lowercase_keyword", "Some reasoning.\nanswer: D", "D"),
    ("test_parse_answers_ignores_echoed_prompt_placeholder", ECHOED_FORMAT, "B"),
    ("test_parse_answers_bracketed_letter", "reasoning\nANSWER: [B]", "B"),
    *[("test_parse_answers_wrapped_label_does_not_depend_on_trailing_text", "reasoning\n" + w, "B")
      for w in WRAPPED],
    *[("test_parse_answers_wrapped_label_does_not_depend_on_trailing_text",
       "reasoning\n" + w + "\nLet me know if you need more.", "B") for w in WRAPPED],
    ("test_parse_answers_ignores_bracketed_prose", "ANSWER: (see the diagram above)", None),
    ("test_fallback_rejects_letters_outside_the_choice_set", "the shape is Z-like", None),
    *[("test_parse_answers_zh_wrapped_label", "推理过程\n" + w, "B") for w in WRAPPED_ZH],
    *[("test_parse_answers_zh_wrapped_label", "推理过程\n" + w + "\nNote: hope this helps.", "B")
      for w in WRAPPED_ZH],
    ("test_parse_answers_placeholder_only_yields_no_valid_option",
     "The last line of your response should be ANSWER: [LETTER] and nothing else.", None),
    ("test_parse_answers_keeps_last_valid_label", "Final answer: ANSWER: D</think>ANSWER: D", "D"),
    ("test_parse_answers_keeps_last_valid_label", "ANSWER: A is wrong.</think>ANSWER: B", "B"),
    ("test_parse_answers_keeps_last_valid_label",
     "format 'ANSWER: [LETTER]'. So B.</think>ANSWER: B", "B"),
    ("test_parse_answers_keeps_last_valid_label", "推理：答案：A 不对。</think>答案：B", "B"),
    ("test_parse_answers_last_marker_wins_in_every_label_form", "ANSWER: A\nANSWER: B", "B"),
    ("test_parse_answers_last_marker_wins_in_every_label_form", "ANSWER: (A)</think>ANSWER: (B)", "B"),
    ("test_parse_answers_last_marker_wins_in_every_label_form",
     "ANSWER: A\nreasoning\nANSWER: (B) 300", "B"),
    ("test_parse_answers_last_marker_wins_in_every_label_form", "答案：(A)</think>答案：（B）", "B"),
    ("test_parse_answers_finds_a_marker_that_follows_prose_on_one_line",
     "ANSWER: A is not right, ANSWER: B. Hope this helps.", "B"),
    ("test_parse_answers_finds_a_marker_that_follows_prose_on_one_line",
     "I first said ANSWER: A but ANSWER: C is correct.", "C"),
    ("test_parse_answers_finds_a_marker_that_follows_prose_on_one_line", "先写答案：A，再改为答案：C。", "C"),
    ("test_parse_answers_skips_a_trailing_marker_without_a_label",
     "ANSWER: B</think>ANSWER: [LETTER]", "B"),
    *[("test_parse_answers_reads_a_label_that_is_justified_in_the_same_breath", "ANSWER: " + j, "B")
      for j in JUSTIFIED],
    *[("test_parse_answers_zh_reads_a_label_that_is_justified_in_the_same_breath", "答案：" + j, "B")
      for j in ["B，因为能量守恒", "B，因为A是错的", "B是正确的，D是干扰项"]],
    ("test_parse_answers_still_rejects_prose_that_names_no_label", "ANSWER: None of the above", None),
    ("test_parse_answers_still_rejects_prose_that_names_no_label",
     "ANSWER: A B C D are all plausible", None),
    ("test_parse_answers_still_rejects_prose_that_names_no_label", "答案：无法确定", None),
    ("test_completion_argument_overrides_raw_model_output",
     "If I answer ANSWER: A that is wrong.</think>ANSWER: B", "B"),
    ("test_completion_argument_overrides_raw_model_output", "ANSWER: A", "A"),
    ("test_completion_argument_overrides_raw_model_output", "如果答案：A 就错了。</think>答案：B", "B"),
    ("test_completion_argument_overrides_raw_model_output", "答案：A", "A"),
    # parse_answers on texts its tests do not cover (same result as EvalScope's code)
    ("parse_answers: no space after the colon", "ANSWER:B", "B"),
    ("parse_answers: space before the colon, bold label", "Answer : **C**", "C"),
    ("parse_answers: closing bracket only", "ANSWER: B)", "B"),
    ("parse_answers: a letter past the options", "ANSWER: E", None),
    ("parse_answers: a number label with four options", "ANSWER: 1", None),
    ("parse_answers: glued labels, single answer", "ANSWER: AB", None),
    ("parse_answers: a list of labels, single answer", "ANSWER: A,B", None),
    # labels joined by a word or a slash: the snapshot read the first label; EvalScope
    # 1.14.1's English parser gives no answer (checked by running it), as groundscope does
    ("parse_answers 1.14.1: labels joined by 'and'", "ANSWER: B and D", None),
    ("parse_answers 1.14.1: labels joined by '/'", "ANSWER: A/C", None),
]


@pytest.mark.parametrize(("completion", "expected"), [case[1:] for case in CASES],
                         ids=[f"{i}-{case[0]}" for i, case in enumerate(CASES)])
def test_evalscope_single_answer_case(completion: str, expected: str | None) -> None:
    assert extract_choice(completion, ABCD) == expected


# (why, completion, EvalScope's result, groundscope's result): rows of the README's table.
# EvalScope's result is end to end: its model layer removes the first complete <think> block
# from the reply before ``parse_answers`` reads it (``api/messages/utils.py``).
DELIBERATE: list[tuple[str, str, str | None, str | None]] = [
    ("a lower-case label alone after the marker is that label", "ANSWER: b", None, "B"),
    ("the reply after an orphan </think> wins over a marker before it",
     "so ANSWER: A</think>I choose (C).", "A", "C"),
    ("a marker inside a complete <think> block counts when the reply gives no answer",
     "<think>ANSWER: B</think>ANSWER: [LETTER]", None, "B"),
]


@pytest.mark.parametrize(("completion", "evalscope", "expected"), [case[1:] for case in DELIBERATE],
                         ids=[case[0] for case in DELIBERATE])
def test_deliberate_difference(completion: str, evalscope: str | None, expected: str | None) -> None:
    assert expected != evalscope  # a row of this table is a difference
    assert extract_choice(completion, ABCD) == expected
