#!/usr/bin/env python
"""redlease.apscheduler: what the glue costs per fire, beside a bare run and a Lock, in one run.

    .venv/bin/python benchmarks/apscheduler_fire.py           # about 10 s
    .venv/bin/python benchmarks/apscheduler_fire.py --calls 2000 --rounds 5
    .venv/bin/python benchmarks/apscheduler_fire.py --url redis://127.0.0.1:6379

Rows, interleaved over ``--rounds`` rounds (the order reversed every other round), each keeping
its best round's p50: ``bare run`` (the job, a no-op, called directly: what APScheduler's own
executor adds nothing to), ``Lock`` (acquire + release), ``fire run`` (a new instant: the job's
lock, its record read, written at the start and at the end, the lock released) and ``fire
skip`` (an instant another scheduler ran: the lock, the record read, the lock released). The
glue is driven as OnceExecutor drives it, without a scheduler around it (APScheduler's own
cost per fire is the same with or without it). Ratios are to ``Lock``.

Runs its own embedded server unless ``--url`` is given.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import redis
from harness import config
from harness.servers import url_or_private
from harness.timing import alternate, p50_us

import redlease
from redlease._sync.scheduled import Fires

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def rows(client: redis.Redis) -> dict[str, Callable[[], None]]:
    lock = redlease.Lock(client, "bench:lock", renew=False)
    fires = Fires(client, ttl=30.0, prefix="bench")
    instants = (START + timedelta(seconds=n) for n in itertools.count())
    done = next(instants)
    fires.run("skipped", done, None, lambda fence: None)  # ran: every later try skips

    def job(fence: int = 0) -> None:
        pass

    def lock_step() -> None:
        lock.acquire()
        lock.release()

    def run_step() -> None:
        assert fires.run("job", next(instants), None, job) is None

    def skip_step() -> None:
        assert fires.run("skipped", done, None, job) is not None  # a Skipped

    return {"bare run": job, "Lock": lock_step, "fire run": run_step, "fire skip": skip_step}


def main() -> int:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server of yours (default: a private one)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with url_or_private(args.url) as url:
        measure(url, args.calls, args.rounds)
    return 0


def measure(url: str, calls: int, rounds: int) -> None:
    """Every row, best of ``rounds`` rounds of ``calls`` calls, and the table."""
    client = redis.Redis.from_url(url)
    try:
        steps = rows(client)
        for step in steps.values():  # warm up: scripts loaded, connections open
            p50_us(step, 50)
        best: dict[str, float] = {}
        for round_no in range(rounds):
            for name in alternate(steps, round_no):
                figure = p50_us(steps[name], calls)
                best[name] = min(best.get(name, figure), figure)
        print(f"a fire's glue vs a bare run and a Lock, p50 us, best of {rounds} x {calls} calls")
        for name, figure in best.items():
            print(f"  {name:<10} {figure:8.1f} us  {figure / best['Lock']:5.2f}x Lock")
    finally:
        redlease.close(client)
        client.close()


if __name__ == "__main__":
    sys.exit(main())
