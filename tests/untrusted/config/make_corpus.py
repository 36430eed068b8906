"""Writes the generated part of the hostile config corpus (too big to commit): run it as
``python make_corpus.py OUT_DIR``, or call its functions (tests/test_untrusted_config.py).

- ``oversize.yaml``: a valid config followed by 2 MiB of comment (the size cap, 1 MiB);
- ``deep.json``: a config whose generation_config nests 100,000 lists (the depth cap);
- ``fanout/``: a General-VQA dataset and the simulator's ground-truth file (``truth.json``,
  simulator/grounding.py) planting the judge fan-outs of issue 12 item 13: an answer of
  5,000 claims, an answer with three 2,000-character claims, an answer whose one claim is
  1 MB, a record of 100 expected elements, a record with 59 paraphrases (60 distinct
  planted answers) and a paraphrased record with 20 reference answers.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
DOG = ROOT / "examples" / "media" / "dog.jpg"

BASE = "eval_type: mock\ndatasets: [general_vqa]\ndataset_args:\n  general_vqa: {local_path: .}\n"

CLAIMS = [f"Claim number {k} about the dog." for k in range(5000)]
LONG_CLAIMS = [f"The dog {'is very ' * 250}brown ({k})." for k in range(3)]
SHORT_CLAIMS = ["The dog is brown.", "The grass is green."]
HUGE_CLAIM = "The dog is " + "very " * 200_000 + "brown."
ELEMENTS = [f"element {k}" for k in range(100)]
PARAPHRASES = [f"What does picture variant {k} show?" for k in range(1, 60)]
QUESTIONS = {"many-claims": "Describe the picture in detail.",
             "long-claims": "List what you see.",
             "huge-claim": "Describe everything.",
             "many-elements": "What is in the picture?",
             "paraphrased": "What does the picture show?",
             "referenced": "Name the animal."}
REFERENCES = [f"Reference answer {k}." for k in range(20)]


def oversize_config(out: Path) -> Path:
    path = out / "oversize.yaml"
    path.write_text(BASE + "#" + "x" * (2 << 20) + "\n")
    return path


def deep_json(out: Path) -> Path:
    path = out / "deep.json"
    depth = 100_000
    path.write_text('{"eval_type": "mock", "datasets": ["general_vqa"], '
                    '"generation_config": {"stop": ' + "[" * depth + "]" * depth + "}}")
    return path


def _record(rid: str, **extra: object) -> dict[str, object]:
    content = [{"type": "text", "text": QUESTIONS[rid]},
               {"type": "image_url", "image_url": {"url": "dog.jpg"}}]
    return {"id": rid, "messages": [{"role": "user", "content": content}], **extra}


def _write_jsonl(path: Path, rows: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def fanout(out: Path) -> tuple[Path, Path]:
    """``(dataset directory, truth file)`` of the judge fan-out cases."""
    data = out / "fanout"
    data.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(DOG, data / "dog.jpg")
    _write_jsonl(data / "grounding.jsonl",
                 [_record("many-claims"), _record("long-claims"), _record("huge-claim")])
    _write_jsonl(data / "completeness.jsonl", [_record("many-elements", elements=ELEMENTS)])
    _write_jsonl(data / "consistency.jsonl", [_record("paraphrased", paraphrases=PARAPHRASES)])
    _write_jsonl(data / "references.jsonl", [_record("referenced", answer=REFERENCES,
                                                     paraphrases=["Which animal is it?"])])
    answers = [
        {"question": QUESTIONS["many-claims"], "answer": "A dog, described in detail.",
         "claims": CLAIMS},
        {"question": QUESTIONS["long-claims"], "answer": "A brown dog on green grass.",
         "claims": [*SHORT_CLAIMS, *LONG_CLAIMS]},
        {"question": QUESTIONS["huge-claim"], "answer": "A very, very brown dog.",
         "claims": [HUGE_CLAIM]},
        {"question": QUESTIONS["many-elements"], "answer": "A dog with element 1 and element 2."},
    ]
    questions = [QUESTIONS["paraphrased"], *PARAPHRASES]
    answers += [{"question": q, "answer": f"Answer {k}: a dog in shade {k}."}
                for k, q in enumerate(questions)]
    answers += [{"question": q, "answer": f"It is animal number {k}."}
                for k, q in enumerate([QUESTIONS["referenced"], "Which animal is it?"])]
    truth = {"images": {"dog": "fanout/dog.jpg"},
             "facts": {"dog": {"supported": SHORT_CLAIMS}},
             "answers": [{"image": "dog", **a} for a in answers]}
    path = out / "truth.json"
    path.write_text(json.dumps(truth))
    return data, path


if __name__ == "__main__":  # pragma: no cover
    target = Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    target.mkdir(parents=True, exist_ok=True)
    print(oversize_config(target), deep_json(target), *fanout(target))
