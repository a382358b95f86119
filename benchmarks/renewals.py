#!/usr/bin/env python3
"""One process holds 10,000 Locks: what does the watchdog cost per tick?

    .venv/bin/python benchmarks/renewals.py                 # 10,000 locks, ttl 3 s, 10 s window
    .venv/bin/python benchmarks/renewals.py --locks 2000 --seconds 5 --url redis://127.0.0.1:6379

Starts a private server (``redlease.server.RedisServer``) unless ``--url`` is given, takes the
locks through one sync client (one watchdog), then watches for ``--seconds``:

* *ticks*: watchdog renewal rounds sent (each is one round trip: a batch larger than
  ``renewals.CHUNK`` goes as several script calls, all written before any reply is read);
* *calls/tick*, *round trips/tick*: script calls and round trips per tick;
* *renewals/s*: leases renewed per second (from the server's ``pexpire`` count);
* *renewer CPU*: the watchdog thread's CPU time (``/proc/self/task/<tid>/stat``) over the
  window, as a share of one core, and per renewal.

The count of ticks wraps the renewal target's ``renew`` (instrumentation of the benchmark; the
renewals themselves are real).
"""

from __future__ import annotations

import time
from typing import Any

import redis
from harness import config
from harness.cpu import thread_cpu
from harness.servers import url_or_private

import redlease
from redlease._core import renewals
from redlease._sync import renewer


def run(url: str, n: int, ttl: float, seconds: float) -> dict[str, Any]:
    client = redis.Redis.from_url(url)
    probe = redis.Redis.from_url(url)
    ticks = {"renew": 0}
    original = renewer.ServerRenewal.renew

    def counted(self: Any, script: Any, due: list[Any]) -> list[bool]:
        ticks["renew"] += 1
        return original(self, script, due)

    renewer.ServerRenewal.renew = counted  # type: ignore[method-assign]
    try:
        locks = [redlease.Lock(client, f"bench:renew:{i}", ttl=ttl) for i in range(n)]
        started = time.monotonic()
        for lock in locks:
            assert lock.acquire(blocking=False)
        took = time.monotonic() - started
        time.sleep(ttl / 3 * 2)  # a round or two: renewals fall into step
        probe.config_resetstat()
        ticks["renew"] = 0
        cpu0, t0 = thread_cpu("redlease-renewer"), time.monotonic()
        time.sleep(seconds)
        cpu1, t1 = thread_cpu("redlease-renewer"), time.monotonic()
        stats = probe.info("commandstats")
        calls = int(stats.get("cmdstat_evalsha", {}).get("calls", 0))
        renewed = int(stats.get("cmdstat_pexpire", {}).get("calls", 0))
        for lock in locks:
            lock.release()
    finally:
        renewer.ServerRenewal.renew = original  # type: ignore[method-assign]
        redlease.close(client)
        client.close()
        probe.close()
    window = t1 - t0
    tick_count = max(ticks["renew"], 1)
    return {
        "locks": n,
        "acquire_s": took,
        "ticks": ticks["renew"],
        "calls_per_tick": calls / tick_count,
        "round_trips_per_tick": 1.0,  # one renew() per tick: its chunks are pipelined
        "renewals_per_s": renewed / window,
        "renewer_cpu_share": (cpu1 - cpu0) / window,
        "renewer_cpu_us_per_renewal": (cpu1 - cpu0) / max(renewed, 1) * 1e6,
    }


def main() -> None:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server to use (default: start a private one)")
    parser.add_argument("--locks", type=int, default=10_000)
    parser.add_argument("--ttl", type=float, default=3.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    with url_or_private(args.url) as url:
        out = run(url, args.locks, args.ttl, args.seconds)
    print(f"renewals benchmark: {out['locks']:,} locks, ttl {args.ttl} s, one client")
    print(f"  chunk size (renewals.CHUNK)       {renewals.CHUNK:,}")
    print(f"  acquiring them took               {out['acquire_s']:.1f} s")
    print(f"  ticks in {args.seconds:.0f} s                     {out['ticks']}")
    print(f"  script calls per tick             {out['calls_per_tick']:.1f}")
    print(f"  round trips per tick              {out['round_trips_per_tick']:.0f}")
    print(f"  renewals/s                        {out['renewals_per_s']:,.0f}")
    print(f"  renewer CPU, share of one core    {out['renewer_cpu_share']:.1%}")
    print(f"  renewer CPU per renewal           {out['renewer_cpu_us_per_renewal']:.1f} us")


if __name__ == "__main__":
    main()
