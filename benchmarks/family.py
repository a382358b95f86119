#!/usr/bin/env python
"""The coordination family under load: ReadWriteLock vs Lock, Semaphore(4), blocked waiters.

    .venv/bin/python benchmarks/family.py              # full run (about 2 minutes)
    .venv/bin/python benchmarks/family.py --quick      # smoke run (under a minute)
    .venv/bin/python benchmarks/family.py --url redis://127.0.0.1:6379

Three measurements, against one server started here (``redlease.server.RedisServer``) unless
``--url`` is given, every ratio computed within this run:

1. 16 reader processes, each looping ``acquire; work (sleep HOLD); release`` for a fixed time,
   under ``ReadWriteLock.read`` and then under a plain ``Lock``: reads/s of each and their
   ratio (the target is >= 4x: readers must share);
2. ``Semaphore(permits=4)`` with 16 processes looping the same: acquisitions/s, the most
   inside at once (counted in Redis inside the critical section: must be <= 4), and the
   longest single wait, also in hold times;
3. Redis commands per second per blocked waiter (a semaphore, a read lock behind a writer, a
   latch), counted with ``INFO stats`` while 8 waiter processes are blocked.

Children are started with ``multiprocessing`` spawn, every wait is bounded, every child is
reaped. Names carry a random run id so runs against a shared server do not collide.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import secrets
import sys
import time
from typing import Any

import redis
from harness import config
from harness.servers import commands_processed, url_or_private
from harness.spawn import reap

import redlease
from redlease._core.latch import LatchKeys
from redlease._core.rwlock import rwlock_keys
from redlease._core.semaphore import semaphore_keys

SPAWN = mp.get_context("spawn")
HOLD = 0.005  # seconds of "work" inside the critical section
PROCESSES = 16
WARM_UP = 3  # first acquisitions per process not timed (they also subscribe to the hub)
ENTER = """
local inside = redis.call('INCR', KEYS[1])
if inside > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], inside) end
return inside
"""


def worker(url: str, kind: str, name: str, seconds: float, start: Any, out: Any) -> None:
    """Loop acquire / HOLD / release for ``seconds``; report (count, longest wait)."""
    client = redis.Redis.from_url(url)
    enter = client.register_script(ENTER)
    if kind == "rw":
        handle: Any = redlease.ReadWriteLock(client, name, ttl=10.0).read
    elif kind == "lock":
        handle = redlease.Lock(client, name, ttl=10.0)
    else:
        handle = redlease.Semaphore(client, name, 4, ttl=10.0)
    start.wait(60)
    count, longest, waited = 0, 0.0, 0.0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        if not handle.acquire(timeout=30):
            raise RuntimeError("acquire timed out")
        wait = time.monotonic() - t0
        if count >= WARM_UP:
            longest = max(longest, wait)
            waited += wait
        enter(keys=[name + ":inside", name + ":max"])
        time.sleep(HOLD)
        client.decr(name + ":inside")
        handle.release()
        count += 1
    out.put((count, longest, waited))


def run(url: str, kind: str, seconds: float, run_id: str) -> dict[str, float]:
    name = f"bench:{run_id}:{kind}"
    start, out = SPAWN.Event(), SPAWN.Queue()
    procs = [
        SPAWN.Process(target=worker, args=(url, kind, name, seconds, start, out))
        for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let every child import and connect
    start.set()
    results = [out.get(timeout=seconds + 90) for _ in procs]
    reap(procs, grace=30.0)
    client = redis.Redis.from_url(url)
    most = int(client.get(name + ":max") or 0)
    client.delete(name + ":max", name + ":inside")
    total = sum(c for c, _, _ in results)
    timed = sum(max(c - WARM_UP, 0) for c, _, _ in results)
    return {
        "per_s": total / seconds,
        "total": total,
        "max_inside": most,
        "longest_wait": max(w for _, w, _ in results),
        "mean_wait": sum(w for _, _, w in results) / max(timed, 1),
    }


def block(url: str, kind: str, name: str, ready: Any) -> None:
    """Block on ``name`` (held elsewhere) for at most 20 s."""
    client = redis.Redis.from_url(url)
    ready.put(os.getpid())
    if kind == "semaphore":
        redlease.Semaphore(client, name, 1, ttl=10.0).acquire(timeout=20)
    elif kind == "read":
        redlease.ReadWriteLock(client, name, ttl=10.0).read.acquire(timeout=20)
    else:
        redlease.CountDownLatch(client, name).wait(20)


def blocked_commands(url: str, kind: str, run_id: str, waiters: int = 8) -> float:
    """Commands/s per blocked waiter while ``waiters`` processes wait.

    The holder takes a 60 s lease without a watchdog, so that the only commands in the
    window are the waiters' own (and our one INFO).
    """
    client = redis.Redis.from_url(url)
    name = f"bench:{run_id}:blocked-{kind}"
    if kind == "semaphore":
        holder: Any = redlease.Semaphore(client, name, 1, ttl=60.0, renew=False)
        holder.acquire()
        queue = semaphore_keys("redlease", name.encode()).queue
    elif kind == "read":
        holder = redlease.ReadWriteLock(client, name, ttl=60.0, renew=False).write
        holder.acquire()
        queue = rwlock_keys("redlease", name.encode()).queue
    else:
        holder = redlease.CountDownLatch(client, name)
        holder.try_set_count(1)
        queue = LatchKeys.build("redlease", name.encode()).waiters
    ready = SPAWN.Queue()
    procs = [SPAWN.Process(target=block, args=(url, kind, name, ready)) for _ in range(waiters)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get(timeout=60)
    for _ in range(300):  # bounded: until every waiter is queued (and so asleep)
        if client.zcard(queue) == waiters:
            break
        time.sleep(0.1)
    time.sleep(0.5)
    window = 3.0
    before = commands_processed(client)
    time.sleep(window)
    after = commands_processed(client)
    per_waiter = max(after - before - 1, 0) / window / waiters  # minus our INFO
    if kind == "latch":
        holder.count_down()
    else:
        holder.release()
    reap(procs, grace=30.0)
    return per_waiter


def main(argv: list[str] | None = None) -> int:
    parser = config.parser(__doc__, paragraph=False)
    config.add_quick(parser, "short smoke run")
    config.add_url(parser, "use this server instead of starting one")
    args = parser.parse_args(argv)
    seconds = 4.0 if args.quick else 15.0
    run_id = secrets.token_hex(4)
    with url_or_private(args.url) as url:
        load = os.getloadavg()[0]
        print(
            f"family benchmark: {PROCESSES} processes, hold {HOLD * 1000:.0f} ms, "
            f"{seconds:.0f} s per row, load {load:.2f}, python {sys.version.split()[0]}"
        )
        rw = run(url, "rw", seconds, run_id)
        lock = run(url, "lock", seconds, run_id)
        print("\n1. 16 readers: ReadWriteLock.read vs Lock")
        print(
            f"   ReadWriteLock.read  {rw['per_s']:8.0f} reads/s  (most inside {rw['max_inside']})"
        )
        print(
            f"   Lock                {lock['per_s']:8.0f} reads/s  "
            f"(most inside {lock['max_inside']})"
        )
        print(
            f"   ratio               {rw['per_s'] / max(lock['per_s'], 1e-9):8.1f}x  (target >= 4x)"
        )
        sem = run(url, "semaphore", seconds, run_id)
        print("\n2. Semaphore(permits=4), 16 processes")
        print(f"   acquisitions/s      {sem['per_s']:8.0f}")
        print(f"   most inside at once {sem['max_inside']:8d}  (must be <= 4)")
        print(
            f"   mean wait           {sem['mean_wait'] * 1000:8.0f} ms  "
            f"({sem['mean_wait'] / HOLD:.0f} hold times)"
        )
        print(
            f"   longest wait        {sem['longest_wait'] * 1000:8.0f} ms  "
            f"({sem['longest_wait'] / HOLD:.0f} hold times, "
            f"{sem['longest_wait'] / max(sem['mean_wait'], 1e-9):.1f}x the mean; "
            f"first {WARM_UP} per process not timed)"
        )
        print("\n3. Redis commands/s per blocked waiter (8 waiters queued, 3 s window)")
        for kind in ("semaphore", "read", "latch"):
            print(f"   {kind:<19} {blocked_commands(url, kind, run_id):8.2f}")
        print(f"\nload after: {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
