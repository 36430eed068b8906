"""General-VMCQ and the legacy TSV layouts, end to end against the simulator."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

from groundscope import run_task
from groundscope.simulator import SimReply, SimRequest, SimulatorServer

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_vmcq_accuracy_tracks_simulator_accuracy(tmp_path: Path) -> None:
    n, p = 400, 0.7
    rows = [{"id": f"q{i}", "question": f"Question number {i}: which option is right?",
             "options": [f"opt {i}-{j}" for j in range(4)], "answer": "ABCD"[i % 4]}
            for i in range(n)]
    write_jsonl(tmp_path / "synthetic.jsonl", rows)
    report = run_task({
        "eval_type": "mock", "model": "sim", "datasets": ["general_vmcq"],
        "dataset_args": {"general_vmcq": {"local_path": str(tmp_path)}},
        "simulator": {"accuracy": p, "seed": 11}, "work_dir": str(tmp_path / "out"),
        "eval_batch_size": 16,
    })
    rep = report.dataset("general_vmcq")
    acc = rep.score("accuracy")
    assert rep.row("accuracy").num == n
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(acc - p) < 4 * sigma, (acc, p)
    assert rep.pretty_name == "General-VMCQ"


def test_bundled_vmcq_examples_via_cli(tmp_path: Path) -> None:
    from groundscope.config import load_config
    from groundscope.runner import iter_samples, plan_dataset

    args = {"general_vmcq": {"local_path": str(EXAMPLES / "mcq"), "subset_list": ["example"]}}
    cfg = load_config({"datasets": ["general_vmcq"], "dataset_args": args, "eval_type": "mock"})
    samples = [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vmcq"), strict=True)]
    with SimulatorServer(samples) as url:
        proc = subprocess.run(
            [sys.executable, "-m", "groundscope", "eval", "--model", "m", "--api-url", url,
             "--datasets", "general_vmcq", "--dataset-args", json.dumps(args),
             "--work-dir", str(tmp_path), "--no-progress"],
            capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "│ m       │ General-VMCQ │ Accuracy ↑ │ example  │     3 │ 100%    │" in proc.stdout


def test_vmcq_dog_record_parts_in_order(tmp_path: Path) -> None:
    from groundscope.config import load_config
    from groundscope.runner import iter_samples, plan_dataset

    args = {"general_vmcq": {"local_path": str(EXAMPLES / "mcq"), "subset_list": ["example"]}}
    cfg = load_config({"datasets": ["general_vmcq"], "dataset_args": args, "eval_type": "mock"})
    samples = [s for _, s in iter_samples(cfg, plan_dataset(cfg, "general_vmcq"), strict=True)]
    server = SimulatorServer(samples, keep_bodies=True)
    url = server.start()
    try:
        run_task({"model": "m", "api_url": url, "datasets": ["general_vmcq"], "dataset_args": args,
                  "work_dir": str(tmp_path)})
        bodies = server.bodies()
    finally:
        server.stop()
    dog = next(b for b in bodies if "Which image shows a dog?" in json.dumps(b))
    content = dog["messages"][-1]["content"]
    assert [p["type"] for p in content] == ["text", "image_url"] * 4
    text = content[0]["text"]
    assert text.startswith("Answer the following multiple choice question. The last line of your "
                           "response should be of the following format: 'ANSWER: [LETTER]' "
                           "(without quotes) where [LETTER] is one of A,B,C,D. Think step by step "
                           "before answering.\n\nWhich image shows a dog?\n\nA) ")
    assert [p["text"] for p in content[2::2]] == ["\nB) ", "\nC) ", "\nD) "]
    assert dog["temperature"] == 0


def test_legacy_mcq_per_category_rows(tmp_path: Path) -> None:
    """Per-category accuracy equals a hand count: questions tagged [right] are answered right."""
    header = "index\tcategory\tanswer\tquestion\tA\tB\timage_path\n"
    img = (EXAMPLES / "media" / "dog.jpg").resolve()
    plan = [("Animals", True), ("Animals", False), ("Animals", True), ("Cities", True),
            ("Cities", False), ("Vehicles", False)]
    lines = [f"{i}\t{cat}\tA\tQ{i} {'[right]' if right else '[wrong]'}\tyes\tno\t{img}\n"
             for i, (cat, right) in enumerate(plan, start=1)]
    (tmp_path / "custom_mcq.tsv").write_text(header + "".join(lines))

    def responder(req: SimRequest) -> SimReply | None:
        text = " ".join(req.texts)
        return SimReply("ANSWER: A" if "[right]" in text else "ANSWER: B")

    with SimulatorServer(responders=[responder]) as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["legacy_mcq"],
                           "dataset_args": {"legacy_mcq": {"local_path": str(tmp_path)}},
                           "work_dir": str(tmp_path / "out")})
    rep = report.dataset("legacy_mcq")
    by_cat = {r.category: (r.num, r.score) for r in rep.metrics if r.category}
    assert by_cat == {"Animals": (3, 2 / 3), "Cities": (2, 0.5), "Vehicles": (1, 0.0)}
    assert rep.score("accuracy") == 3 / 6
    table = report.table()
    assert "custom_mcq · Animals" in table and "66.7%" in table


def test_legacy_vqa_exact_match(tmp_path: Path) -> None:
    img = (EXAMPLES / "media" / "dog.jpg").resolve()
    rows = [("1", "Dog", "What animal?"), ("2", "Museum", "What building?"), ("3", "Tokyo", "City?")]
    text = "index\tanswer\tquestion\timage_path\n" + "".join(
        f"{i}\t{a}\t{q}\t{img}\n" for i, a, q in rows)
    (tmp_path / "custom_vqa.tsv").write_text(text)
    replies = {"What animal?": "Dog", "What building?": " Museum ", "City?": "Kyoto"}

    def responder(req: SimRequest) -> SimReply | None:
        return SimReply(next(v for k, v in replies.items() if k in " ".join(req.texts)))

    with SimulatorServer(responders=[responder]) as url:
        report = run_task({"model": "m", "api_url": url, "datasets": ["legacy_vqa"],
                           "dataset_args": {"legacy_vqa": {"local_path": str(tmp_path)}},
                           "work_dir": str(tmp_path / "out")})
    assert report.dataset("legacy_vqa").score("exact_match") == 2 / 3
