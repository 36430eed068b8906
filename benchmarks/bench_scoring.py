"""Hand-run speed check of BLEU + ROUGE (groundscope.scoring.text).

Prints the tokenizers' one-off start-up cost, then pairs/s for BLEU-1..4 and ROUGE-1/2/L
computed together on generated English and Chinese prediction/reference pairs. The texts
are random (practically all distinct), so the tokenization caches do not flatter the
figures. Target: >= 5,000 English pairs/s on the 2-core development machine.

    python benchmarks/bench_scoring.py [--pairs 100000] [--seed 0]
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable

from groundscope.scoring import text

_EN_TEXT = (
    "the a an image shows man woman child dog cat car street red blue green large small two "
    "three people are is was sitting standing running on in at near next to with of and "
    "there it they he she picture background left right top bottom white black wooden table"
)
_EN_VOCAB = _EN_TEXT.split()
_EN_EXTRA = ("don't", "it's", "3.14", "1,000", "(left)", "Mr.", "U.S.", "e.g.", '"red"', "--")
_ZH_TEXT = (
    "图片 中 有 一个 两只 男人 女人 孩子 狗 猫 汽车 街道 红色 蓝色 绿色 大 小 在 上 里 旁边 "
    "正在 坐 站 跑 桌子 白色 黑色 背景 左边 右边 的 是 和 很 天气 公园 北京"
)
_ZH_VOCAB = _ZH_TEXT.split()
_ZH_PUNCT = ("，", "。", "！", "？", "、")


def _english(rng: random.Random) -> str:
    words = []
    for _ in range(rng.randint(4, 24)):
        words.append(rng.choice(_EN_EXTRA) if rng.random() < 0.06 else rng.choice(_EN_VOCAB))
        if rng.random() < 0.08:
            words[-1] += rng.choice((",", ".", "!", "?"))
    sentence = " ".join(words)
    return sentence[0].upper() + sentence[1:] + rng.choice((".", ".", "", "!"))


def _chinese(rng: random.Random) -> str:
    parts = []
    for _ in range(rng.randint(3, 16)):
        parts.append(rng.choice(_ZH_VOCAB))
        if rng.random() < 0.1:
            parts.append(rng.choice(_ZH_PUNCT))
    return "".join(parts) + "。"


def _pairs(make: Callable[[random.Random], str], n: int, seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [(make(rng), make(rng)) for _ in range(n)]


def _score_all(pairs: list[tuple[str, str]]) -> tuple[float, float]:
    """Wall-clock and CPU seconds (the CPU figure is steadier on a shared machine)."""
    start, cpu = time.perf_counter(), time.process_time()
    for prediction, reference in pairs:
        text.bleu(prediction, reference)
        text.rouge(prediction, reference)
    return time.perf_counter() - start, time.process_time() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    start = time.perf_counter()
    text.bleu_tokens("Warm up the English tokenizer.")
    english_init = time.perf_counter() - start
    start = time.perf_counter()
    text.bleu_tokens("初始化中文分词。")
    chinese_init = time.perf_counter() - start
    print(f"tokenizer init: English (imports nltk) {english_init:.3f}s, "
          f"Chinese (jieba dictionary) {chinese_init:.3f}s")

    for name, make in (("English", _english), ("Chinese", _chinese)):
        pairs = _pairs(make, args.pairs, args.seed)
        distinct = len({t for pair in pairs for t in pair})
        elapsed, cpu = _score_all(pairs)
        print(f"{name}: {len(pairs):,} pairs ({distinct:,} distinct texts), BLEU+ROUGE "
              f"in {elapsed:.2f}s = {len(pairs) / elapsed:,.0f} pairs/s "
              f"({elapsed / len(pairs) * 1e6:.0f} us/pair; CPU {len(pairs) / cpu:,.0f} pairs/s)")


if __name__ == "__main__":
    main()
