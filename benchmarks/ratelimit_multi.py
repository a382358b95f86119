#!/usr/bin/env python
"""Rate limits: one 3-limit check against three 1-limit checks, and the ASGI middleware's cost.

    .venv/bin/python benchmarks/ratelimit_multi.py            # about 30 s
    .venv/bin/python benchmarks/ratelimit_multi.py --quick    # about 8 s
    .venv/bin/python benchmarks/ratelimit_multi.py --url redis://127.0.0.1:6379

1. *hits/s*, one process, sync client, per algorithm: ``multi`` is one ``RateLimiter`` with
   three limits (``"1000000/second;10000000/hour;100000000/day"``: every hit passes, so all
   three are written); ``three`` is three one-limit ``RateLimiter``\\ s hit one after the other
   (what one writes without multi-limit checks). ``multi / three`` is the speed-up.
2. *the middleware*: an ASGI app (Starlette, one plain-text route) called directly, without
   HTTP, with and without ``redlease.web.RateLimitMiddleware`` (one limit, asyncio client).
   The overhead per request is the difference; ``floor`` is one bare ``EVALSHA`` of
   ``return 1`` on the same client (one round trip), for scale.

The variants are interleaved over rounds (order reversed every other round) and each keeps
its median round, so a noisy neighbour hurts all alike. Judge the ratios, not the absolute
figures: the machine is shared.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import redis
import redis.asyncio
from harness import config
from harness.servers import url_or_private
from harness.timing import alternate
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse
from starlette.routing import Route

import redlease
import redlease.web
from redlease._core.ratelimit import ALGORITHMS

THREE = "1000000/second;10000000/hour;100000000/day"


def median_rate(samples: dict[str, list[float]]) -> dict[str, float]:
    return {name: statistics.median(values) for name, values in samples.items()}


def hits_per_second(url: str, algorithm: str, rounds: int, hits: int) -> dict[str, float]:
    client = redis.Redis.from_url(url)
    run = uuid.uuid4().hex[:8]
    multi = redlease.RateLimiter(client, f"m{run}", rate=THREE, algorithm=algorithm)
    singles = [
        redlease.RateLimiter(client, f"s{i}{run}", rate=part, algorithm=algorithm)
        for i, part in enumerate(THREE.split(";"))
    ]

    def one_check(subject: str) -> None:
        multi.hit(subject)

    def three_checks(subject: str) -> None:
        for limiter in singles:
            limiter.hit(subject)

    variants: dict[str, Callable[[str], None]] = {"multi": one_check, "three": three_checks}
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():  # warm-up: scripts loaded, connection made
        for i in range(50):
            fn(f"warm{i}")
    for r in range(rounds):
        for name in alternate(variants, r):
            fn = variants[name]
            started = time.perf_counter()
            for i in range(hits):
                fn(f"u{i % 100}")
            samples[name].append(hits / (time.perf_counter() - started))
    client.close()
    return median_rate(samples)


async def hello(request: Request) -> PlainTextResponse:
    return PlainTextResponse("hello")


async def call(app: Any) -> int:
    """One GET / through ``app``, as an ASGI server would call it; returns the status."""
    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
        "scheme": "http", "path": "/", "raw_path": b"/", "query_string": b"", "root_path": "",
        "headers": [(b"host", b"bench")], "client": ("127.0.0.1", 40000),
        "server": ("bench", 80),
    }  # fmt: skip
    status = 0

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, send)
    return status


async def middleware_cost(url: str, rounds: int, requests: int) -> dict[str, float]:
    client = redis.asyncio.Redis.from_url(url)
    bare = Starlette(routes=[Route("/", hello)])
    limited = Starlette(routes=[Route("/", hello)])
    limited.add_middleware(
        redlease.web.RateLimitMiddleware, client=client, rate="1000000000/minute",
        on_unavailable="deny", name=f"bench{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    floor_sha = await client.script_load("return 1")

    async def floor() -> int:
        await client.evalsha(floor_sha, 0)
        return 200

    variants: dict[str, Callable[[], Awaitable[int]]] = {
        "app": lambda: call(bare),
        "app+middleware": lambda: call(limited),
        "floor": floor,
    }
    samples: dict[str, list[float]] = {name: [] for name in variants}
    for fn in variants.values():
        for _ in range(50):
            assert await fn() == 200
    for r in range(rounds):
        for name in alternate(variants, r):
            fn = variants[name]
            started = time.perf_counter()
            for _ in range(requests):
                await fn()
            samples[name].append((time.perf_counter() - started) / requests * 1e6)  # us
    await client.aclose()
    return median_rate(samples)


def main() -> None:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server to use (default: a private one)")
    config.add_quick(parser, "small samples")
    args = parser.parse_args()
    rounds, size = (3, 300) if args.quick else (7, 1500)
    with url_or_private(args.url) as url:
        print(f"load average before: {os.getloadavg()[0]:.2f}; {rounds} rounds of {size}")
        print("\n1. hits/s, one process (median round)")
        print(f"{'algorithm':<14}{'multi (1x3)':>14}{'three (3x1)':>14}{'multi/three':>14}")
        for algorithm in ALGORITHMS:
            rates = hits_per_second(url, algorithm, rounds, size)
            ratio = rates["multi"] / rates["three"]
            print(f"{algorithm:<14}{rates['multi']:>14,.0f}{rates['three']:>14,.0f}{ratio:>13.2f}x")
        print("\n2. ASGI middleware, us per request (median round)")
        cost = asyncio.run(middleware_cost(url, rounds, size))
        overhead = cost["app+middleware"] - cost["app"]
        print(f"app alone          {cost['app']:>9.1f} us")
        print(f"app + middleware   {cost['app+middleware']:>9.1f} us")
        print(f"floor (EVALSHA)    {cost['floor']:>9.1f} us")
        print(f"overhead           {overhead:>9.1f} us = {overhead / cost['floor']:.2f}x the floor;"
              f" with/without = {cost['app+middleware'] / cost['app']:.2f}x")  # fmt: skip
        print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
