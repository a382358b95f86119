#!/usr/bin/env python3
"""How long is the path of one lock? Modules and Python calls of a warm acquire+release.

    .venv/bin/python benchmarks/callpath.py                  # sync and asyncio, a private server
    .venv/bin/python benchmarks/callpath.py --url redis://127.0.0.1:6379 --json out.json

One process, one lock nobody else uses, ``ttl=10``: after ``--warm`` warm-up rounds (the
runtime, the watchdog, the connection and the script cache are up), one ``acquire()`` +
``release()`` runs under a profiler hook (``sys.setprofile``, the calling thread only) that
counts every Python-level call:

* *redlease modules*: the distinct ``redlease`` modules whose functions ran;
* *redlease calls*: calls of functions defined in ``redlease`` (the figure issue 35 targets);
* *all Python calls*: the same with redis-py, asyncio and the standard library counted too.

The figures are counts, not times: they do not depend on the machine's load. The asyncio row
counts the calling task's thread, which also runs the event loop, so callbacks of the loop
that run during the pair count too.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import redis
import redis.asyncio
from harness import config
from harness.servers import url_or_private

import redlease
import redlease.asyncio


class Counting:
    """A ``sys.setprofile`` hook: Python calls per module while it is installed."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()

    def hook(self, frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            self.calls[str(frame.f_globals.get("__name__", "?"))] += 1

    def figures(self) -> dict[str, Any]:
        ours = {m: n for m, n in self.calls.items() if m.split(".")[0] == "redlease"}
        return {
            "redlease_modules": len(ours),
            "redlease_calls": sum(ours.values()),
            "all_calls": sum(self.calls.values()),
            "modules": dict(sorted(ours.items(), key=lambda item: (-item[1], item[0]))),
        }


def measured(pair: Callable[[], Any]) -> dict[str, Any]:
    counting = Counting()
    sys.setprofile(counting.hook)
    try:
        pair()
    finally:
        sys.setprofile(None)
    return counting.figures()


def sync_path(url: str, warm: int) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    lock = redlease.Lock(client, f"bench:callpath:{uuid.uuid4().hex}", ttl=10)

    def pair() -> None:
        assert lock.acquire()
        lock.release()

    try:
        for _ in range(warm):
            pair()
        return measured(pair)
    finally:
        redlease.close(client)
        client.close()


async def async_path(url: str, warm: int) -> dict[str, Any]:
    client = redis.asyncio.Redis.from_url(url)
    lock = redlease.asyncio.Lock(client, f"bench:callpath:{uuid.uuid4().hex}", ttl=10)

    async def pair() -> None:
        assert await lock.acquire()
        await lock.release()

    try:
        for _ in range(warm):
            await pair()
        counting = Counting()
        sys.setprofile(counting.hook)
        try:
            await pair()
        finally:
            sys.setprofile(None)
        return counting.figures()
    finally:
        await redlease.asyncio.close(client)
        await client.aclose()


def show(title: str, figures: dict[str, Any]) -> None:
    print(f"{title}")
    print(f"  redlease modules   {figures['redlease_modules']}")
    print(f"  redlease calls     {figures['redlease_calls']}")
    print(f"  all Python calls   {figures['all_calls']}")
    for module, calls in figures["modules"].items():
        print(f"    {calls:4d}  {module}")


def main() -> None:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server to use (default: start a private one)")
    parser.add_argument("--warm", type=int, default=50, help="warm-up pairs before the counted one")
    config.add_json(parser)
    args = parser.parse_args()
    with url_or_private(args.url) as url:
        out = {
            "sync": sync_path(url, args.warm),
            "asyncio": asyncio.run(async_path(url, args.warm)),
        }
    show("sync Lock.acquire() + release()", out["sync"])
    show("asyncio Lock.acquire() + release()", out["asyncio"])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
