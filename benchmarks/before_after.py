#!/usr/bin/env python3
"""redlease now against redlease at an earlier commit, in one run: is any figure worse?

    .venv/bin/python benchmarks/before_after.py --before 5d85a09            # both benchmarks
    .venv/bin/python benchmarks/before_after.py --before HEAD~3 --rounds 3 --quick

The earlier commit is checked out into a temporary git worktree. Each round runs
``handoff.py`` and ``redlock.py`` (redlease rows only, sections 1 and 2) once per tree, in
alternating order, with ``PYTHONPATH`` pointing at that tree's ``src``; the benchmark scripts
themselves are this tree's, so both trees are measured the same way. The table shows, per
figure, the median over the rounds for each tree and their ratio (after / before). Ratios to
a floor measured in the same process (``ratio_floor``) are the figures to judge: absolute
times move with the machine's load.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCHES = {
    "handoff": ["--libs", "redlease,redlease-async", "--sections", "1,2"],
    "redlock": ["--libs", "redlease,redlease-async", "--sections", "1,2"],
}
FIGURES = (
    "ratio_floor",
    "ratio_floor_async",
    "ratio",
    "p50_us",
    "acq_per_s",
    "handoff_p50_us",
    "longest_wait_ms",
    "per_process_min",
    "per_process_max",
)
"""The figures compared (every other one is ignored)."""
HIGHER_IS_BETTER = {"acq_per_s", "per_process_min"}


def flatten(data: Any, prefix: str = "") -> dict[str, float]:
    """``section/row/figure -> value`` for the compared figures of a benchmark's JSON."""
    out: dict[str, float] = {}
    if isinstance(data, dict):
        for key, value in data.items():
            path = f"{prefix}/{key}" if prefix else str(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                if key in FIGURES and "redlease" in path:
                    out[path] = float(value)
            else:
                out.update(flatten(value, path))
    return out


def run(bench: str, src: Path, quick: bool) -> dict[str, float]:
    with tempfile.NamedTemporaryFile(suffix=".json") as out:
        args = [sys.executable, str(ROOT / "benchmarks" / f"{bench}.py"), *BENCHES[bench]]
        args += ["--json", out.name] + (["--quick"] if quick else [])
        env = {**os.environ, "PYTHONPATH": str(src)}
        subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL, timeout=1800)
        data = json.loads(Path(out.name).read_text())
    return flatten({k: v for k, v in data.items() if k not in ("env", "failed_targets")})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", required=True, help="the earlier commit (any git revision)")
    parser.add_argument("--rounds", type=int, default=2, help="rounds per tree (default 2)")
    parser.add_argument("--quick", action="store_true", help="the benchmarks' smoke runs")
    parser.add_argument("--benches", default="handoff,redlock", help="subset of handoff,redlock")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(before), args.before],
            check=True,
            capture_output=True,
        )
        try:
            trees = {"before": before / "src", "after": ROOT / "src"}
            figures: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
            for i in range(args.rounds):
                order = ["before", "after"] if i % 2 == 0 else ["after", "before"]
                for bench in args.benches.split(","):
                    for tree in order:
                        print(f"round {i + 1}: {bench} {tree}", file=sys.stderr)
                        for key, value in run(bench, trees[tree], args.quick).items():
                            figures[tree].setdefault(f"{bench}:{key}", []).append(value)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                check=False,
                capture_output=True,
            )
    print(f"before = {args.before}, after = the work tree; median of {args.rounds} round(s)")
    print(f"{'figure':<70} {'before':>10} {'after':>10} {'after/before':>12}")
    worse = []
    for key in sorted(figures["after"]):
        if key not in figures["before"]:
            continue
        old = statistics.median(figures["before"][key])
        new = statistics.median(figures["after"][key])
        ratio = new / old if old else float("nan")
        print(f"{key:<70} {old:>10.3f} {new:>10.3f} {ratio:>11.2f}x")
        better_high = key.rsplit("/", 1)[-1] in HIGHER_IS_BETTER
        if (ratio < 0.9) if better_high else (ratio > 1.1):
            worse.append(key)
    print("worse by more than 10%: " + (", ".join(worse) if worse else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
