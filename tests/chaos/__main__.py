"""Run a chaos schedule from the command line and print its summary table.

    python -m tests.chaos --seed 7 --ops 100000 --target lock
    python -m tests.chaos --seed 7 --ops 100000 --target redlock --max-seconds 3600
    python -m tests.chaos --seed 7 --ops 5000 --target cluster --max-seconds 600
    python -m tests.chaos --seed 7 --ops 2000 --unfenced        # the twin: stale writes show

Exit status: 0 if no stale write was accepted (fenced) and the run completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .harness import ChaosConfig, run, summary
from .history import check, parse
from .schedule import CLUSTER_KINDS, KINDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=100_000, help="acquire/write/release cycles")
    parser.add_argument("--target", choices=("lock", "redlock", "cluster"), default="lock")
    parser.add_argument("--min-faults", type=int, default=20, help="of every kind, at least")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--ttl", type=float, default=0.5, help="lease, seconds")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="hard bound")
    parser.add_argument("--unfenced", action="store_true", help="the twin: no fence check")
    parser.add_argument("--gap", type=float, default=0.6, help="seconds between faults of a lane")
    parser.add_argument("--kinds", help="comma-separated fault kinds (default: all)")
    parser.add_argument("--history", help="keep the history files in this directory")
    parser.add_argument("--check", metavar="DIR", help="only re-check a kept history and explain")
    args = parser.parse_args(argv)
    if args.check:
        return explain(args.check)
    # SIGTERM (timeout, kill) must run the same clean-up as Ctrl-C: stop workers and servers.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    config = ChaosConfig(
        target=args.target,
        seed=args.seed,
        ops=args.ops,
        min_faults=args.min_faults,
        workers=args.workers,
        ttl=args.ttl,
        fenced=not args.unfenced,
        max_seconds=args.max_seconds,
        gap=args.gap,
        kinds=tuple(args.kinds.split(","))
        if args.kinds is not None
        else (CLUSTER_KINDS if args.target == "cluster" else KINDS),
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    outcome = run(config, args.history)
    print(summary(outcome))
    cmd = f"python -m tests.chaos --seed {args.seed} --ops {args.ops} --target {args.target}"
    print(f"reproduce: {cmd}" + (" --unfenced" if args.unfenced else ""))
    if config.fenced:
        return 0 if outcome.complete and outcome.report.ok else 1
    return 0 if outcome.complete else 1


def explain(directory: str) -> int:
    """Re-check the history kept in ``directory``; print overlaps not explained by a pause."""
    lines: list[str] = []
    for path in sorted(Path(directory).glob("*.jsonl")):
        lines.extend(path.read_text().splitlines())
    history = parse(lines)
    report = check(history)
    acquired = {}
    for line in lines:
        if '"ev":"acq"' in line:
            event = json.loads(line)
            acquired[(event["w"], event["h"])] = event
    print(
        f"holds {report.holds}, writes {report.writes} (refused {report.refused}), "
        f"overlaps {len(report.overlaps)}, stale accepted {len(report.stale)}"
    )
    print(f"overlaps near: {dict(report.overlap_causes)}")
    print(f"refused near: {dict(report.refused_causes)}")
    unexplained = [o for o in report.overlaps if not set(o.causes) & {"pause", "kill"}]
    print(f"overlaps not explained by a pause or kill of the first holder: {len(unexplained)}")
    for o in unexplained[:20]:
        a, b = o.first, o.second
        assert a.end is not None and b.end is not None
        validity = acquired.get((a.worker, a.hold), {}).get("v")
        print(
            f"  {a.name}: {a.worker}#{a.hold} fence {a.fence} held {(a.end - a.start) / 1e3:.1f} ms"
            f" ({a.outcome}, validity at acquire {validity}) overlaps {b.worker}#{b.hold} fence"
            f" {b.fence} by {(min(a.end, b.end) - b.start) / 1e3:.1f} ms; near {o.causes}"
        )
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
