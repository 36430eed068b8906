"""Writes replies.jsonl: hostile replies to a batch verification request of `count` claims,
each with the fragment of the contract error it must raise (tests/test_untrusted_verify_batch.py).

Run by hand from this folder: python3 make_corpus.py
"""

from __future__ import annotations

import json
from pathlib import Path


def entry(k: int, verdict: str = "supported", **extra: object) -> dict[str, object]:
    return {"claim": k, "verdict": verdict, "reason": f"reason {k}", **extra}


def dump(obj: object) -> str:
    return json.dumps(obj)


CASES: list[tuple[str, str, int, str]] = [
    ("fewer verdicts", dump({"verdicts": [entry(1), entry(2)]}), 3,
     '3 claims were sent but "verdicts" has 2 entries'),
    ("more verdicts", dump({"verdicts": [entry(1), entry(2), entry(3)]}), 2,
     '2 claims were sent but "verdicts" has 3 entries'),
    ("no verdicts", dump({"verdicts": []}), 1, '1 claims were sent but "verdicts" has 0'),
    ("swapped order", dump({"verdicts": [entry(2), entry(1)]}), 2,
     "verdicts[0] is for claim 2, but entry 1 must be for claim 1"),
    ("repeated claim", dump({"verdicts": [entry(1), entry(1)]}), 2,
     "verdicts[1] is for claim 1, but entry 2 must be for claim 2"),
    ("zero-based numbers", dump({"verdicts": [entry(0), entry(1)]}), 2,
     "verdicts[0] is for claim 0"),
    ("number as text", dump({"verdicts": [entry("1")]}), 1,  # type: ignore[arg-type]
     "verdicts[0]: \"claim\" must be the claim number 1, got '1'"),
    ("number as float", dump({"verdicts": [entry(1.0)]}), 1,  # type: ignore[arg-type]
     '"claim" must be the claim number 1, got 1.0'),
    ("number as bool", dump({"verdicts": [entry(True)]}), 1,  # type: ignore[arg-type]
     '"claim" must be the claim number 1, got True'),
    ("no claim number", dump({"verdicts": [{"verdict": "supported"}]}), 1,
     '"claim" must be the claim number 1, got None'),
    ("unknown verdict", dump({"verdicts": [entry(1), entry(2, "partly")]}), 2,
     'verdicts[1]: "verdict" must be one of supported, contradicted, not_determinable'),
    ("verdict as bool", dump({"verdicts": [entry(1, True)]}), 1,  # type: ignore[arg-type]
     'verdicts[0]: "verdict" must be one of'),
    ("no verdict", dump({"verdicts": [{"claim": 1, "reason": "r"}]}), 1,
     'the JSON object has no "verdict" key'),
    ("extra entry key", dump({"verdicts": [entry(1, confidence=0.9)]}), 1,
     "verdicts[0] has an unexpected key 'confidence'"),
    ("extra top-level key", dump({"verdicts": [entry(1)], "summary": "all fine"}), 1,
     "unexpected key 'summary'"),
    ("verdicts as object", dump({"verdicts": {"1": "supported"}}), 1,
     '"verdicts" must be a list of objects'),
    ("entry as text", dump({"verdicts": ["supported"]}), 1,
     "verdicts[0] must be an object"),
    ("per-claim shape", dump({"verdict": "supported", "reason": "r"}), 1, "unexpected key"),
    ("no JSON", "Claim 1 is supported, claim 2 is contradicted.", 2,
     "no JSON object in the reply"),
    ("empty", "", 1, "an empty reply"),
    # cut off: only the inner entry closes, and it is not the reply's shape
    ("unterminated", '{"verdicts": [{"claim": 1, "verdict": "supported"}', 1,
     "unexpected key 'claim'"),
    ("final word broken", dump({"verdicts": [entry(1)]}) + " Correction: "
     + dump({"verdicts": []}), 1, '1 claims were sent but "verdicts" has 0'),
    ("draft in think only", "<think>" + dump({"verdicts": [entry(1)]}) + "</think> done", 1,
     "no JSON object in the reply"),
]


def main() -> None:
    lines = [dump({"case": c, "reply": r, "count": n, "problem": p}) for c, r, n, p in CASES]
    Path(__file__).with_name("replies.jsonl").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
