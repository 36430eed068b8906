"""Writes the answers fixtures of this folder, one per supported foreign format, as those
tools write them (facts from their writers, cited in src/groundscope/dataset/answers.py):

- EvalScope v1.10 ``predictions/<model>/<benchmark>_<subset>.jsonl`` (``ModelResult``) and
  ``reviews/<model>/<benchmark>_<subset>.jsonl`` (``ReviewResult``);
- VLMEvalKit ``{model}_{dataset}.xlsx`` / ``.tsv`` (pandas, ``index=False``, tsv quoted
  ``QUOTE_ALL``; the benchmark's columns plus ``prediction``) and a ``.csv``;
- lmms-eval v0.7.2 ``--log_samples`` ``<date>_samples_<task>.jsonl`` (``doc`` and
  ``arguments`` dropped, one-request lists flattened).

Each answers ids 3, 1, 0 and 9 of data/items.jsonl (ids 0..3): another order, id 2 missing,
id 9 extra. Run: python examples/answers/make_fixtures.py
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import openpyxl

HERE = Path(__file__).resolve().parent
ANSWERS = {3: "Paris", 1: "A red bus.", 0: "Two cats", 9: "Not in the dataset"}
QUESTIONS = {0: "How many cats?", 1: "What is parked?", 2: "Which colour?", 3: "Which city?"}


def jsonl(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))


def evalscope() -> None:
    def message(text: str | list) -> dict:
        return {"id": None, "content": text, "source": "generate", "metadata": None,
                "internal": None, "role": "assistant", "tool_calls": None, "model": "my-vlm",
                "perf_metrics": None}

    preds, reviews = [], []
    for i, text in ANSWERS.items():
        content = text if i != 1 else [{"type": "reasoning", "reasoning": "A bus, red."},
                                       {"type": "text", "text": text}]
        user = {"id": None, "content": QUESTIONS.get(i, "?"), "source": "input", "role": "user"}
        preds.append({"index": i, "model": "my-vlm", "model_output": {
            "id": None, "model": "my-vlm", "choices": [{"message": message(content),
                                                        "stop_reason": "stop", "logprobs": None}],
            "usage": {"input_tokens": 20, "output_tokens": 3, "total_tokens": 23},
            "time": 0.4, "metadata": None, "error": None, "perf_metrics": None},
            "messages": [user, message(content)], "agent_trace": None, "metadata": {}})
        reviews.append({"index": i, "target": "", "messages": [user, message(content)],
                        "agent_trace": None, "sample_score": {
                            "score": {"value": {"acc": 0.0}, "status": "success", "judge_summary": None,
                                      "extracted_prediction": text, "prediction": text,
                                      "explanation": None, "metadata": {}, "main_score_name": "acc"},
                            "sample_id": i, "group_id": i, "generation_index": 0,
                            "sample_metadata": {}}})
    jsonl(HERE / "evalscope" / "predictions" / "my-vlm" / "general_vqa_items.jsonl", preds)
    jsonl(HERE / "evalscope" / "reviews" / "my-vlm" / "general_vqa_items.jsonl", reviews)


def vlmevalkit() -> None:
    header = ["index", "question", "answer", "category", "prediction"]
    rows = [[i, QUESTIONS.get(i, "?"), "", "demo", text] for i, text in ANSWERS.items()]
    book = openpyxl.Workbook()
    sheet = book.active
    sheet.append(header)
    for row in rows:
        sheet.append(row)
    book.save(HERE / "my-vlm_Items.xlsx")
    for name, delimiter in (("my-vlm_Items.tsv", "\t"), ("my-vlm_Items.csv", ",")):
        with open(HERE / name, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f, delimiter=delimiter, quoting=csv.QUOTE_ALL)
            writer.writerow(header)
            writer.writerows(rows)


def lmms_eval() -> None:
    rows = []
    for i, text in ANSWERS.items():
        row = {"doc_id": i, "target": "", "filtered_resps": text if i != 0 else [text, "2 cats"],
               "token_counts": [None], "doc_hash": f"{i:064x}", "exact_match": 0.0,
               "input": QUESTIONS.get(i, "?")}
        if i == 0:
            row["resps"] = [[text, "2 cats"]]
        rows.append(row)
    jsonl(HERE / "lmms-eval" / "my-vlm" / "20260801_120000_samples_items.jsonl", rows)


def groundscope() -> None:
    jsonl(HERE / "answers.jsonl", [{"id": str(i), "prediction": t} for i, t in ANSWERS.items()])


if __name__ == "__main__":
    evalscope()
    vlmevalkit()
    lmms_eval()
    groundscope()
