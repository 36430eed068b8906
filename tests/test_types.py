"""The shared value types: behaviour that every scorer relies on."""

from __future__ import annotations

from groundscope.types import Completion, Prediction, PredictionStatus


def test_prediction_text_is_the_answer_or_empty_when_the_request_failed() -> None:
    ok = Prediction("s1", "h", PredictionStatus.OK, completion=Completion("A dog."))
    failed = Prediction("s1", "h", PredictionStatus.ERROR, error="timeout", error_kind="timeout")
    assert ok.text == "A dog."
    assert failed.text == ""
