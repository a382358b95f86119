#!/usr/bin/env python
"""redlease.cached: what a hit costs, and a cold key under 16 processes.

    .venv/bin/python benchmarks/cache.py                 # both sections (about a minute)
    .venv/bin/python benchmarks/cache.py --calls 2000 --rounds 7 --processes 16
    .venv/bin/python benchmarks/cache.py --url redis://127.0.0.1:6379

1. **A hit against a plain GET + json.loads**, through the same client, in one run: the cached
   call (key from the arguments, one EVALSHA of cache_read.lua, JSON decode) against
   ``json.loads(client.get(key))``, sync and asyncio. The two are interleaved over ``--rounds``
   rounds (the order reversed every other round), each keeping its best round's p50. Target:
   a hit at most 1.2x the plain GET.
2. **A cold key under 16 processes**: every process calls the same function at once (behind a
   barrier); the computation takes 0.2 s and counts itself in Redis. Ways: ``cached``
   (redlease.cached), ``recipe`` (docs/recipes.md's hand-written rebuild with a redlease
   Lock), ``recipe-redis-py`` (the same with redis-py's Lock, polling), ``no-lock`` (GET,
   compute on a miss, SET). Figures: computations, the longest call of a process.

Runs its own embedded server unless ``--url`` is given; every child is joined.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import statistics
import sys
import time
from typing import Any

import redis
import redis.asyncio
from harness import config
from harness.servers import url_or_private
from harness.spawn import reap
from harness.timing import alternate, p50_us

import redlease
import redlease.asyncio

VALUE = {"name": "report", "rows": list(range(20)), "total": 190.5}
TARGET_HIT = 1.2
COMPUTE_S = 0.2
WAYS = ("cached", "recipe", "recipe-redis-py", "no-lock")


# -- 1. a hit ---------------------------------------------------------------------------------
def hits_sync(url: str, calls: int, rounds: int) -> tuple[float, float]:
    client = redis.Redis.from_url(url)

    @redlease.cached(client, ttl=3600, name="report")
    def report(day: str) -> dict[str, Any]:
        return VALUE

    report("mon")
    client.set("plain:mon", json.dumps(VALUE))

    def cached_call() -> None:
        report("mon")

    def plain_call() -> None:
        json.loads(client.get("plain:mon"))  # type: ignore[arg-type]

    best = {"cached": float("inf"), "plain": float("inf")}
    for r in range(rounds):
        for name, call in alternate([("cached", cached_call), ("plain", plain_call)], r):
            best[name] = min(best[name], p50_us(call, calls))
    redlease.close(client)
    client.close()
    return best["cached"], best["plain"]


async def hits_async(url: str, calls: int, rounds: int) -> tuple[float, float]:
    client = redis.asyncio.Redis.from_url(url)

    @redlease.cached(client, ttl=3600, name="report")
    async def report(day: str) -> dict[str, Any]:
        return VALUE

    await report("mon")
    await client.set("plain:mon", json.dumps(VALUE))

    async def cached_call() -> None:
        await report("mon")

    async def plain_call() -> None:
        json.loads(await client.get("plain:mon"))

    best = {"cached": float("inf"), "plain": float("inf")}
    for r in range(rounds):
        for name, acall in alternate([("cached", cached_call), ("plain", plain_call)], r):
            samples = []
            for _ in range(calls):
                began = time.perf_counter_ns()
                await acall()
                samples.append(time.perf_counter_ns() - began)
            best[name] = min(best[name], statistics.median(samples) / 1000)
    await redlease.asyncio.close(client)
    await client.aclose()
    return best["cached"], best["plain"]


# -- 2. a cold key under N processes ----------------------------------------------------------
def compute(client: redis.Redis) -> dict[str, Any]:
    client.incr("computations")
    time.sleep(COMPUTE_S)
    return VALUE


def caller(url: str, way: str, barrier: Any, results: Any) -> None:
    client = redis.Redis.from_url(url)

    @redlease.cached(client, ttl=60, lock_ttl=10, name="cached")
    def cached() -> dict[str, Any]:
        return compute(client)

    def recipe(lock: Any) -> dict[str, Any]:
        value = client.get("page")
        if value is None:
            with lock:
                value = client.get("page")  # filled while we waited?
                if value is None:
                    fresh = compute(client)
                    client.set("page", json.dumps(fresh), ex=60)
                    return fresh
        return dict(json.loads(value))

    def no_lock() -> dict[str, Any]:
        value = client.get("page")
        if value is None:
            fresh = compute(client)
            client.set("page", json.dumps(fresh), ex=60)
            return fresh
        return dict(json.loads(value))

    calls = {
        "cached": cached,
        "recipe": lambda: recipe(redlease.Lock(client, "rebuild:page", ttl=10, timeout=30)),
        "recipe-redis-py": lambda: recipe(client.lock("rebuild:page", timeout=10)),
        "no-lock": no_lock,
    }
    barrier.wait(120)
    began = time.monotonic()
    value = calls[way]()
    results.put((value == VALUE, time.monotonic() - began))
    redlease.close(client)
    client.close()


def cold_key(url: str, way: str, processes: int) -> tuple[int, float, bool]:
    with redis.Redis.from_url(url) as c:
        c.flushall()
    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(processes + 1), ctx.Queue()
    children = [
        ctx.Process(target=caller, args=(url, way, barrier, results)) for _ in range(processes)
    ]
    for child in children:
        child.start()
    try:
        barrier.wait(120)
        answers = [results.get(timeout=120) for _ in children]
    finally:
        reap(children, grace=30.0)
    with redis.Redis.from_url(url) as c:
        computations = int(c.get("computations") or 0)
    return computations, max(took for _, took in answers), all(ok for ok, _ in answers)


# -- the run ----------------------------------------------------------------------------------
def main(argv: list[str]) -> int:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server to use (default: start an embedded one)")
    parser.add_argument("--calls", type=int, default=2000, help="calls per round and way")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--processes", type=int, default=16)
    args = parser.parse_args(argv)
    with url_or_private(args.url) as url:
        print(f"redlease.cached benchmark against {url} (redis-py {redis.__version__})")
        print("\n1. a hit vs GET + json.loads, same client, p50 of the best round:")
        sync_hit, sync_plain = hits_sync(url, args.calls, args.rounds)
        async_hit, async_plain = asyncio.run(hits_async(url, args.calls, args.rounds))
        worst = 0.0
        for label, hit, plain in (
            ("sync", sync_hit, sync_plain),
            ("asyncio", async_hit, async_plain),
        ):
            ratio = hit / plain
            worst = max(worst, ratio)
            print(f"   {label:8} hit {hit:7.1f} µs   GET+decode {plain:7.1f} µs   {ratio:.2f}x")
        verdict = "met" if worst <= TARGET_HIT else "MISSED"
        print(f"   target: at most {TARGET_HIT}x: {verdict}")
        print(f"\n2. a cold key, {args.processes} processes at once, {COMPUTE_S} s computation:")
        for way in WAYS:
            computations, longest, ok = cold_key(url, way, args.processes)
            note = "" if ok else "   (a wrong value was returned!)"
            print(
                f"   {way:16} computations {computations:3}   longest call "
                f"{longest * 1000:7.0f} ms{note}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
