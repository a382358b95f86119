#!/usr/bin/env python
"""Once: what a run and a skip cost, against a Lock's acquire + release, in one run.

    .venv/bin/python benchmarks/once.py                   # about 10 s
    .venv/bin/python benchmarks/once.py --calls 2000 --rounds 5
    .venv/bin/python benchmarks/once.py --url redis://127.0.0.1:6379

Rows, interleaved over ``--rounds`` rounds (the order reversed every other round), each keeping
its best round's p50: ``Lock`` (acquire + release), ``Once run`` (try_start + fail: fail
frees the name at once so the next call starts again, and costs the one script call that
finish does), ``Once skip`` (try_start while a run succeeded within its period: one script
call that starts nothing). Ratios are to ``Lock``.

Runs its own embedded server unless ``--url`` is given.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import redis
from harness import config
from harness.servers import url_or_private
from harness.timing import alternate, p50_us

import redlease


def rows(client: redis.Redis) -> dict[str, Callable[[], None]]:
    lock = redlease.Lock(client, "bench:lock", renew=False)
    run_once = redlease.Once(client, "bench:run", every=3600)
    skipped = redlease.Once(client, "bench:skip", every=3600)
    first = skipped.try_start()
    assert first is not None
    first.finish()  # done: every later try_start within the hour skips

    def lock_step() -> None:
        lock.acquire()
        lock.release()

    def run_step() -> None:
        run = run_once.try_start()
        assert run is not None
        run.fail()

    def skip_step() -> None:
        assert skipped.try_start() is None

    return {"Lock": lock_step, "Once run": run_step, "Once skip": skip_step}


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
        print(f"Once vs Lock, p50 us, best of {rounds} rounds of {calls} calls")
        for name, figure in best.items():
            print(f"  {name:<10} {figure:8.1f} us  {figure / best['Lock']:5.2f}x Lock")
    finally:
        redlease.close(client)
        client.close()


if __name__ == "__main__":
    sys.exit(main())
