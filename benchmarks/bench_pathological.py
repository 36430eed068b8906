"""Hand-run check that hostile texts cost linear CPU (issue 12): answer extraction,
``<think>`` stripping, judge-reply JSON scanning, normalisation, prompt-block reading and
BLEU / ROUGE on the inputs the issue names, and their siblings.

Prints CPU seconds per case, at the given size and at 4x that size (a linear cost grows
about 4x, a quadratic one about 16x). Each case runs in its own process, so a slow one can
be stopped by ``--max-cpu`` (RLIMIT_CPU) without losing the others: ``>limit`` marks it.

    python benchmarks/bench_pathological.py [--scale 1] [--max-cpu 120]

Against another checkout, e.g. the code before the fix:
``PYTHONPATH=/path/to/old/src python benchmarks/bench_pathological.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

# name -> (setup code defining fn, input expression in n, n at --scale 1)
CASES: dict[str, tuple[str, str, int]] = {
    "choice: '<think>' * n": (
        "from groundscope.scoring.choice import extract_choice\n"
        "fn = lambda s: extract_choice(s, 'ABCD')", "'<think>' * n", 30_000),
    "choice: '<think' * n (no '>')": (
        "from groundscope.scoring.choice import extract_choice\n"
        "fn = lambda s: extract_choice(s, 'ABCD')", "'<think' * n", 30_000),
    "choice: 'ANSWER: ' * n": (
        "from groundscope.scoring.choice import extract_choice\n"
        "fn = lambda s: extract_choice(s, 'ABCD')", "'ANSWER: ' * n", 30_000),
    "judge reply: '{' * n": (
        "from groundscope.scoring.judge_prompt import parse_verdict\n"
        "fn = parse_verdict", "'{' * n", 8_000),
    "judge reply: '{\"' * n": (
        "from groundscope.scoring.judge_prompt import parse_verdict\n"
        "fn = parse_verdict", "'{\"' * n", 8_000),
    "judge reply: '<think>' * n": (
        "from groundscope.scoring.judge_prompt import parse_verdict\n"
        "fn = parse_verdict", "'<think>' * n", 30_000),
    "grounding reply: '{\"claims\": [' + '[' * n": (
        "from groundscope.scoring.grounding_prompt import parse_claims\n"
        "fn = parse_claims", "'{\"claims\": [' + '[' * n + ']' * n + ']}'", 100_000),
    "prompt blocks: '<element>\\n' * n": (
        "from groundscope.scoring.grounding_prompt import quoted\n"
        "fn = lambda s: quoted(s, 'element')", "'<element>\\n' * n", 20_000),
    "normalise: 'one ' + 'hundred ' * n": (
        "from groundscope.scoring.normalise import normalise_answer\n"
        "fn = normalise_answer", "'one ' + 'hundred ' * n", 5_000),
    "ROUGE: n distinct tokens vs a short reference": (
        "from groundscope.scoring.text import rouge\n"
        "fn = lambda s: rouge(s, 'the cat sat on the mat.')",
        "' '.join(f'w{i}' for i in range(n))", 125_000),
    "BLEU + ROUGE: punctuation-heavy text (chars = 24 n)": (
        "from groundscope.scoring.text import bleu, rouge\n"
        "fn = lambda s: (bleu(s, 'the cat sat.'), rouge(s, 'the cat sat.'))",
        "'a, b. c! d? (e) \\'f\\' \"g\" ' * n", 40_000),
}

_CHILD = """
import json, sys, time
{setup}
n = int(sys.argv[1])
s = {expr}
start = time.process_time()
try:
    fn(s)
    outcome = "ok"
except Exception as exc:  # the figure matters here, not the outcome
    outcome = type(exc).__name__
print(json.dumps({{"cpu": time.process_time() - start, "chars": len(s), "outcome": outcome}}))
"""


def _run(setup: str, expr: str, n: int, max_cpu: int) -> dict[str, object]:
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_CPU, (max_cpu, max_cpu + 1))

    code = _CHILD.format(setup=setup, expr=expr)
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code, str(n)], capture_output=True, text=True,
                          preexec_fn=limit, env=os.environ.copy())
    if proc.returncode != 0 or not proc.stdout.strip():
        return {"cpu": None, "chars": None, "outcome": f">{max_cpu}s" if proc.returncode < 0
                else proc.stderr.strip().splitlines()[-1:] or "failed",
                "wall": time.perf_counter() - started}
    return json.loads(proc.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", type=float, default=1.0, help="multiply every n")
    parser.add_argument("--max-cpu", type=int, default=120, help="CPU seconds per case")
    parser.add_argument("--only", default="", help="run the cases whose name contains this")
    args = parser.parse_args()
    print(f"{'case':58s} {'chars':>9s} {'CPU s':>8s} {'4x chars':>9s} {'CPU s':>8s} {'ratio':>6s}")
    for name, (setup, expr, n) in CASES.items():
        if args.only not in name:
            continue
        n = max(1, int(n * args.scale))
        one = _run(setup, expr, n, args.max_cpu)
        four = _run(setup, expr, 4 * n, args.max_cpu)

        def cpu(r: dict[str, object]) -> str:
            return f"{r['cpu']:.3f}" if isinstance(r["cpu"], float) else str(r["outcome"])

        ratio = (f"{four['cpu'] / max(one['cpu'], 1e-3):.1f}"  # type: ignore[operator]
                 if isinstance(one["cpu"], float) and isinstance(four["cpu"], float) else "-")
        print(f"{name:58s} {one['chars'] or '-':>9} {cpu(one):>8s} {four['chars'] or '-':>9} "
              f"{cpu(four):>8s} {ratio:>6s}", flush=True)


if __name__ == "__main__":
    main()
