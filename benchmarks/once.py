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

import argparse
import statistics
import sys
import time
from collections.abc import Callable

import redis

import redlease
from redlease.server import RedisServer


def p50_us(step: Callable[[], None], calls: int) -> float:
    samples = []
    for _ in range(calls):
        started = time.perf_counter_ns()
        step()
        samples.append(time.perf_counter_ns() - started)
    return statistics.median(samples) / 1000


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
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", help="a server of yours (default: a private one)")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    server = None if args.url else RedisServer().start()
    url = args.url or server.url  # type: ignore[union-attr]
    client = redis.Redis.from_url(url)
    try:
        steps = rows(client)
        for step in steps.values():  # warm up: scripts loaded, connections open
            p50_us(step, 50)
        best: dict[str, float] = {}
        for round_no in range(args.rounds):
            order = list(steps) if round_no % 2 == 0 else list(reversed(steps))
            for name in order:
                figure = p50_us(steps[name], args.calls)
                best[name] = min(best.get(name, figure), figure)
        print(f"Once vs Lock, p50 us, best of {args.rounds} rounds of {args.calls} calls")
        for name, figure in best.items():
            print(f"  {name:<10} {figure:8.1f} us  {figure / best['Lock']:5.2f}x Lock")
    finally:
        redlease.close(client)
        client.close()
        if server is not None:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
