"""The floor under groundscope's CPU per sample: the same work done by a bare script (hand-run).

    python benchmarks/bench_floor.py                 # 0 ms, concurrency 32, N=2,000, 3 pairs
    python benchmarks/bench_floor.py --latency-ms 200 --concurrency 128 --pairs 5

A bare script, against the same simulator process as groundscope's own run, does per sample
only what a sample cannot do without: it reads the record's image, takes its SHA-256 (the
content id a resume needs), parses its header with Pillow (the pixel cap), base64-encodes it
(``pybase64``), serialises the body with orjson, posts it on one pooled aiohttp session, parses
the reply, scores BLEU and ROUGE with groundscope's own functions (``scoring/text.py``: the
metrics themselves are not overhead) and appends two JSON lines to a file. Left out, and so
measured as groundscope's cost over the floor: the dataset's checks (record fields, path
confinement, formats), the rate gate, retries and the request hash, the rows' read-back check,
usage and progress, the reports, the page and its thumbnails.

Each side is a fresh process, imports done before its clock starts, alternating A B A B;
groundscope's side is ``run_task`` as ``bench_ab.py`` runs it. Printed: client CPU ms per
sample and samples/s for both, with each pair's ratio; groundscope's twice, for the whole
run (its lazy imports, the tokenizer's build, the reports and the page included) and for
its streaming phase alone (the tokenizer's build still inside: the floor builds it before
its clock). The floor's clock also leaves out reading the JSONL file, which it does whole
before it starts. The floor is the least CPU per sample
any client of this design (Python, aiohttp, Pillow) spends on this workload on this machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import make_vqa_dataset, run_eval_child, simulator_process, source_env

FLOOR = r"""
import asyncio, hashlib, io, json, os, sys, time
import aiohttp, orjson, pybase64
from PIL import Image
from groundscope.scoring.text import bleu, rouge

url, data_dir, conc, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
with open(os.path.join(data_dir, "bench.jsonl"), "rb") as fh:
    records = [orjson.loads(line) for line in fh]
bleu("a warm up", "a warm up"), rouge("a warm up", "a warm up")  # the tokenizer's one-off build

async def main():
    todo = iter(records)
    connector = aiohttp.TCPConnector(limit=conc)
    async with aiohttp.ClientSession(connector=connector) as session:
        with open(out, "wb") as sink:
            async def worker():
                for rec in todo:
                    text_part, image_part = rec["messages"][0]["content"]
                    with open(os.path.join(data_dir, image_part["image_url"]["url"]), "rb") as f:
                        raw = f.read()
                    digest = hashlib.sha256(raw).hexdigest()
                    with Image.open(io.BytesIO(raw), formats=["JPEG"]) as img:
                        assert img.width * img.height < 178_956_970
                    uri = "data:image/jpeg;base64," + pybase64.b64encode_as_string(raw)
                    body = orjson.dumps({"model": "sim", "temperature": 0, "messages": [
                        {"role": "user", "content": [
                            {"type": "text", "text": text_part["text"]},
                            {"type": "image_url", "image_url": {"url": uri, "detail": "auto"}}]}]})
                    async with session.post(url + "/chat/completions", data=body,
                                            headers={"Content-Type": "application/json"}) as resp:
                        reply = orjson.loads(await resp.read())
                    answer = reply["choices"][0]["message"]["content"]
                    values = {**bleu(answer, rec["answer"]), **rouge(answer, rec["answer"])}
                    sink.write(orjson.dumps({"id": rec["id"], "prediction": answer,
                                             "media": digest}) + b"\n")
                    sink.write(orjson.dumps({"id": rec["id"], "values": values}) + b"\n")
                    sink.flush()
            await asyncio.gather(*(worker() for _ in range(conc)))

t0, c0 = time.perf_counter(), time.process_time()
asyncio.run(main())
print(json.dumps({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0}))
"""


def floor_child(url: str, data: Path, conc: int, out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", FLOOR, url, str(data), str(conc), str(out)],
                          capture_output=True, text=True, check=True, env=source_env(None))
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=2000, help="samples (2,000)")
    ap.add_argument("--concurrency", type=int, default=32, help="requests in flight (32)")
    ap.add_argument("--latency-ms", type=float, default=0.0, help="the simulator's latency (0)")
    ap.add_argument("--pairs", type=int, default=3, help="interleaved pairs (3)")
    args = ap.parse_args()
    n, conc = args.n, args.concurrency
    data = make_vqa_dataset(n)
    got: dict[str, list[tuple[float, float]]] = {"floor": [], "groundscope": [],
                                                 "groundscope, streaming": []}
    with simulator_process(data, latency_ms=args.latency_ms) as url, \
            tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for i in range(args.pairs):
            f = floor_child(url, data, conc, tmp / f"floor{i}.jsonl")
            g = run_eval_child(url, data, conc, tmp / f"gs{i}")
            if g["succeeded"] != n:
                raise SystemExit(f"groundscope: {g['succeeded']} of {n} samples succeeded")
            got["floor"].append((1000 * f["cpu"] / n, n / f["wall"]))
            got["groundscope"].append((1000 * g["cpu"] / n, n / g["wall"]))
            got["groundscope, streaming"].append((1000 * g["pipeline_cpu"] / n, n / g["pipeline"]))
    print(f"N={n}, concurrency {conc}, {args.latency_ms:g} ms latency, {args.pairs} interleaved "
          "pairs (medians; ratio groundscope / floor per pair: min / median / max)")
    for col, label in ((0, "client CPU ms/sample"), (1, "samples/s")):
        a = [x[col] for x in got["floor"]]
        for side, shown in (("groundscope", "whole run"), ("groundscope, streaming", "streaming")):
            b = [x[col] for x in got[side]]
            ratios = sorted(y / x for x, y in zip(a, b, strict=True))
            print(f"  {label:<22} floor {statistics.median(a):8.3f}   groundscope, {shown:<9} "
                  f"{statistics.median(b):8.3f}   {ratios[0]:.2f} / {statistics.median(ratios):.2f}"
                  f" / {ratios[-1]:.2f}")


if __name__ == "__main__":
    main()
