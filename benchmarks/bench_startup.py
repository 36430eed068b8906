"""Start-up time of ``groundscope --help`` and of ``import groundscope`` (hand-run).

    python benchmarks/bench_startup.py

Each command runs 10 times in a fresh interpreter; the median and the best are printed.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import time

COMMANDS = {
    "groundscope --help": [sys.executable, "-m", "groundscope", "--help"],
    "import groundscope": [sys.executable, "-c", "import groundscope"],
    "python (empty)": [sys.executable, "-c", "pass"],
}


def main(runs: int = 10) -> None:
    for label, cmd in COMMANDS.items():
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            subprocess.run(cmd, check=True, capture_output=True)
            times.append(time.perf_counter() - start)
        print(f"{label:<20} median {statistics.median(times) * 1000:6.0f} ms   "
              f"best {min(times) * 1000:6.0f} ms")


if __name__ == "__main__":
    main()
