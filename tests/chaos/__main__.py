"""Run a chaos schedule from the command line and print its summary table.

    python -m tests.chaos --seed 7 --ops 100000 --target lock
    python -m tests.chaos --seed 7 --ops 100000 --target redlock --max-seconds 3600
    python -m tests.chaos --seed 7 --ops 2000 --unfenced        # the twin: stale writes show

Exit status: 0 if no stale write was accepted (fenced) and the run completed, 1 otherwise.
"""

from __future__ import annotations

import argparse
import signal
import sys

from .harness import ChaosConfig, run, summary
from .schedule import KINDS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.chaos", description=__doc__)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--ops", type=int, default=100_000, help="acquire/write/release cycles")
    parser.add_argument("--target", choices=("lock", "redlock"), default="lock")
    parser.add_argument("--min-faults", type=int, default=20, help="of every kind, at least")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--ttl", type=float, default=0.5, help="lease, seconds")
    parser.add_argument("--max-seconds", type=float, default=3600.0, help="hard bound")
    parser.add_argument("--unfenced", action="store_true", help="the twin: no fence check")
    parser.add_argument("--gap", type=float, default=0.6, help="seconds between faults of a lane")
    parser.add_argument("--kinds", help="comma-separated fault kinds (default: all)")
    parser.add_argument("--history", help="keep the history files in this directory")
    args = parser.parse_args(argv)
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
        kinds=tuple(args.kinds.split(",")) if args.kinds is not None else KINDS,
        progress=lambda line: print(line, file=sys.stderr, flush=True),
    )
    outcome = run(config, args.history)
    print(summary(outcome))
    cmd = f"python -m tests.chaos --seed {args.seed} --ops {args.ops} --target {args.target}"
    print(f"reproduce: {cmd}" + (" --unfenced" if args.unfenced else ""))
    if config.fenced:
        return 0 if outcome.complete and outcome.report.ok else 1
    return 0 if outcome.complete else 1


if __name__ == "__main__":
    sys.exit(main())
