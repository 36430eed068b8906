"""End to end: ``groundscope eval`` as a user types it, against the simulator on loopback."""

from __future__ import annotations

import base64
import json
import shutil

import pytest

from cli_support import EXAMPLES, ROOT, dataset_samples, run_cli, table_rows
from groundscope.simulator import SimBehaviour, SimulatorServer

SECRET = "sk-groundscope-test-SECRET-0123456789"
VQA_ARGS = {"general_vqa": {"local_path": str(EXAMPLES / "vqa"),
                            "subset_list": ["example_openai", "example_placeholder"]}}
# run from elsewhere, the examples' ../media is outside the dataset's folder and the cwd
MEDIA_ROOT = ["--media-root", str(EXAMPLES / "media")]


def example_samples() -> list:
    return dataset_samples("general_vqa", VQA_ARGS)


@pytest.fixture(scope="module")
def server():
    sim = SimulatorServer(example_samples(), SimBehaviour(accuracy=1.0), keep_bodies=True)
    sim.start()
    yield sim
    sim.stop()


@pytest.fixture(scope="module")
def finished_run(server, tmp_path_factory):
    work = tmp_path_factory.mktemp("work")
    server.reset()
    proc = run_cli(
        "eval", "--model", "sim-vl", "--api-url", server.base_url, "--api-key", "$GS_E2E_KEY",
        "--eval-type", "openai_api", "--datasets", "general_vqa",
        "--dataset-args", json.dumps(VQA_ARGS), "--work-dir", str(work), "--eval-batch-size", "4",
        *MEDIA_ROOT, "--no-progress", cwd=work, env_extra={"GS_E2E_KEY": SECRET})
    assert proc.returncode == 0, proc.stderr
    (run_dir,) = [p for p in work.iterdir() if p.is_dir()]
    return proc, run_dir, server.bodies(), server.requests()


def test_table_rows(finished_run) -> None:
    proc, _, _, _ = finished_run
    rows = table_rows(proc.stdout)
    n_openai = sum(1 for s in example_samples() if s.subset == "example_openai")
    n_placeholder = sum(1 for s in example_samples() if s.subset == "example_placeholder")
    # The oracle at accuracy 1.0 answers every reference verbatim.
    assert rows[("ROUGE ↑ · L · Recall", "example_openai")] == (n_openai, "100%")
    assert rows[("ROUGE ↑ · L · Recall", "example_placeholder")] == (n_placeholder, "100%")
    assert rows[("ROUGE ↑ · L · Recall", "OVERALL")] == (n_openai + n_placeholder, "100%")
    assert rows[("BLEU ↑ · 1", "OVERALL")][1] == "100%"
    labels = {label for label, _ in rows}
    assert labels == {f"BLEU ↑ · {n}" for n in range(1, 5)} | {
        f"ROUGE ↑ · {v} · {s}" for v in "12L" for s in ("Recall", "Precision", "F1")}
    assert "General-VQA" in proc.stdout and "sim-vl" in proc.stdout


def test_run_directory_files(finished_run) -> None:
    _, run_dir, _, _ = finished_run
    assert (run_dir / "config.json").is_file()
    assert (run_dir / "logs" / "eval_log.log").is_file()
    preds = sorted((run_dir / "predictions" / "sim-vl").glob("*.jsonl"))
    assert [p.name for p in preds] == ["general_vqa_example_openai.jsonl",
                                      "general_vqa_example_placeholder.jsonl"]
    rows = [json.loads(line) for line in preds[0].read_text().splitlines()]
    assert all(r["status"] == "ok" and r["prediction"] for r in rows)
    assert len({r["sample_id"] for r in rows}) == len(rows)
    reviews = (run_dir / "reviews" / "sim-vl" / "general_vqa_example_openai.jsonl").read_text()
    assert len(reviews.splitlines()) == 2 * len(rows)  # bleu + rouge per sample
    report = json.loads((run_dir / "reports" / "sim-vl" / "general_vqa.groundscope.json").read_text())
    assert report["schema_version"] == 1
    assert report["summary"]["requested"] == report["summary"]["succeeded"] > 0
    assert report["primary_metric"] == "rouge-l-r"
    assert all(r["ci_low"] is not None for r in report["metrics"])


def test_outputs_keep_paths_not_base64(finished_run) -> None:
    _, run_dir, _, _ = finished_run
    text = "".join(p.read_text() for p in (run_dir / "predictions").rglob("*.jsonl"))
    assert "../media/dog.jpg" in text
    assert ";base64," not in text.replace("data:image", "")  # no payloads, only hashes
    assert "sha256:" in text  # inline media are kept by content hash


def test_api_key_never_written(finished_run) -> None:
    proc, run_dir, _, requests = finished_run
    assert SECRET not in proc.stdout + proc.stderr
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path
    # ...but it was sent, as a bearer token, on every request.
    assert all(r["auth_sha256"] for r in requests)


def _parts(bodies: list, kind: str) -> list[dict]:
    return [p for b in bodies for m in b["messages"] if isinstance(m["content"], list)
            for p in m["content"] if p["type"] == kind]


def test_wire_format(finished_run) -> None:
    _, _, bodies, _ = finished_run
    assert bodies and all(b["temperature"] == 0 for b in bodies)
    assert all(b["model"] == "sim-vl" for b in bodies)
    images = _parts(bodies, "image_url")
    assert images
    for part in images:
        url = part["image_url"]["url"]
        assert url.startswith(("data:image/jpeg;base64,", "data:image/png;base64,", "http"))
        if url.startswith("data:image/jpeg"):
            assert base64.b64decode(url.split(",", 1)[1])[:3] == b"\xff\xd8\xff"
    assert any(p["image_url"].get("detail") == "high" for p in images)
    audios = _parts(bodies, "input_audio")
    assert audios
    for part in audios:
        assert part["input_audio"]["format"] in ("wav", "mp3")
        raw = base64.b64decode(part["input_audio"]["data"], validate=True)
        assert raw[:4] == b"RIFF" or raw[:3] == b"ID3" or raw[0] == 0xFF
    videos = _parts(bodies, "video_url")
    assert videos and all(v["video_url"]["url"].startswith("data:video/mp4;base64,") for v in videos)


def test_placeholders_expand_in_order(finished_run) -> None:
    _, _, bodies, _ = finished_run
    mixed = [b for b in bodies for m in b["messages"] if isinstance(m["content"], list)
             and any(p.get("text", "").strip().startswith("Watch") for p in m["content"])]
    assert mixed, "the <image 1> Watch <video 1> record was not sent"
    kinds = [p["type"] for p in mixed[0]["messages"][-1]["content"]]
    assert kinds == ["image_url", "text", "video_url", "text"]


def test_demo_config_runs_offline(tmp_path) -> None:
    proc = run_cli("eval", "--config", str(EXAMPLES / "demo.yaml"), "--work-dir", str(tmp_path),
                   "--no-progress", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    rows = table_rows(proc.stdout)
    assert ("ROUGE ↑ · L · Recall", "OVERALL") in rows
    assert "Results saved to" in proc.stdout
    # the examples' ../media lie inside the working directory (a media root): nothing skipped
    counts = [line for line in proc.stdout.splitlines() if "requested" in line]
    assert len(counts) == 3 and all("skipped 0 bad records" in line for line in counts), counts


def _resume(server, run_dir, cwd):
    """``groundscope eval ... --use-cache run_dir`` of the examples; no request may be sent."""
    server.reset()
    proc = run_cli("eval", "--model", "sim-vl", "--api-url", server.base_url,
                   "--datasets", "general_vqa", "--dataset-args", json.dumps(VQA_ARGS),
                   "--use-cache", str(run_dir), *MEDIA_ROOT, "--no-progress", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    assert server.stats()["requests"] == 0
    return proc


def test_resume_sends_nothing_for_finished_samples(server, finished_run, tmp_path) -> None:
    _, run_dir, _, _ = finished_run
    _resume(server, run_dir, tmp_path)
    preds = (run_dir / "predictions" / "sim-vl" / "general_vqa_example_openai.jsonl").read_text()
    ids = [json.loads(line)["sample_id"] for line in preds.splitlines()]
    assert len(ids) == len(set(ids))


EARLIER_RUN = ROOT / "tests" / "earlier_runs" / "vqa_989d77d"  # see its README.md


def test_resume_reuses_the_answers_an_earlier_version_saved(server, tmp_path) -> None:
    """A run groundscope saved at 989d77d, when a local medium entered the request hash by its
    BLAKE2b (SHA-256 since): resumed by this version, it asks the model nothing and keeps its
    rows as they were."""
    run_dir = tmp_path / "earlier"
    shutil.copytree(EARLIER_RUN, run_dir)
    for path in run_dir.rglob("*.json*"):  # written in /work/main: moved to this checkout
        path.write_text(path.read_text().replace('"/work/main/examples', f'"{EXAMPLES}'))
    saved = {p: p.read_bytes() for p in run_dir.rglob("*.jsonl")}
    assert any(b"../media/" in rows for rows in saved.values())  # local media are hashed
    proc = _resume(server, run_dir, tmp_path)
    assert {p: p.read_bytes() for p in saved} == saved
    assert table_rows(proc.stdout)[("ROUGE ↑ · L · Recall", "OVERALL")][0] == 15


def test_score_and_report_commands(finished_run, server) -> None:
    proc, run_dir, _, _ = finished_run
    server.reset()
    rescored = run_cli("score", str(run_dir), cwd=run_dir)
    assert rescored.returncode == 0, rescored.stderr
    assert table_rows(rescored.stdout) == table_rows(proc.stdout)
    rebuilt = run_cli("report", str(run_dir), cwd=run_dir)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert table_rows(rebuilt.stdout) == table_rows(proc.stdout)
    assert server.stats()["requests"] == 0


def test_config_error_is_one_line(tmp_path) -> None:
    proc = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                   '{"general_vqa": {"local_path": "x", "subset": ["a"]}}', cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("groundscope: error: dataset_args.general_vqa: unknown key "
                                   "'subset' (did you mean 'subset_list'?)")


def test_end_of_run_page_is_bounded(finished_run, tmp_path) -> None:
    import shutil

    from groundscope.report.html import write_html

    _, run_dir, _, _ = finished_run
    copy = tmp_path / "run"
    shutil.copytree(run_dir, copy)
    text = write_html(copy, max_samples=3).read_text()
    total = len(example_samples())
    assert f"shows the first 3 of {total} samples" in text
    full = write_html(copy).read_text()
    assert "shows the first" not in full


def test_evalscope_legacy_flags_and_dry_run(tmp_path) -> None:
    args = json.dumps({"general_vqa": {"local_path": str(EXAMPLES / "vqa")}})
    proc = run_cli("eval", "--eval-type", "mock", "--datasets", "general_vqa", "--dataset-args",
                   args, "--judge-strategy", "llm", "--judge-model-args",
                   json.dumps({"model_id": "j", "api_url": "mock", "api_key": SECRET}),
                   "--stream", "--dry-run", "--json", "--work-dir", str(tmp_path / "out"),
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(proc.stdout)["config"]
    assert shown["judge"]["strategy"] == "llm" and shown["judge"]["models"][0]["model_id"] == "j"
    assert SECRET not in proc.stdout + proc.stderr
    assert not (tmp_path / "out").exists()  # a dry run creates nothing
