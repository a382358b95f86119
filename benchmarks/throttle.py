#!/usr/bin/env python
"""Waiting on a rate limit: ``RateLimiter.acquire`` against sleep-and-retry loops over ``hit()``.

    .venv/bin/python benchmarks/throttle.py            # about 70 s
    .venv/bin/python benchmarks/throttle.py --quick    # about 25 s
    .venv/bin/python benchmarks/throttle.py --url redis://127.0.0.1:6379

4 processes x 2 threads call a partner API through one ``50/second`` GCRA limit, as fast as
the limit lets them, for 8 s (4 s with ``--quick``). Each admitted call is recorded in Redis
on the server's clock (the "partner" sees it then). Rows:

* ``acquire``: ``limiter.acquire(key)``: one script reserves the slot, the waiter sleeps once;
* ``hit + sleep retry_after``: ``while not (a := limiter.hit(key)).allowed:
  time.sleep(a.retry_after)``, what users write today;
* ``hit + sleep retry_after + 20% jitter``: the same, each sleep stretched by ``U(0, 0.2)``;
* ``pyrate-limiter RedisBucket``: PyrateLimiter 4's ``Limiter(RedisBucket.init(...))`` and
  its blocking ``try_acquire`` (a sleep-and-retry loop inside the library), same rate, when
  ``pyrate-limiter`` is installed (the ``bench`` extra).

Figures: *use* = admitted per second after the first second (past the initial burst) ÷ the
rate; *calls/admission* = script calls (``INFO commandstats``: EVAL + EVALSHA, less the
recording one) per admitted call; *cmds/admission* = every command the server processed
(``total_commands_processed``: those scripts run count too; less the recording script) per
admitted call; *peak 100 ms* = the most admissions in any 100 ms after the first second ÷
the 5 the rate allows; *gap p99* = the 99th percentile of the gaps between admissions ÷ the
20 ms the rate spaces them by; *wait max* = the longest one call waited (on the client) ÷ the
160 ms in which every waiter gets one turn when served in order. The ratios compare each row
with ``acquire`` in the same run. Judge the ratios, not absolute figures: the machine is
shared.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
import statistics
import threading
import time
from typing import Any

import redis
from harness import config
from harness.servers import calls, url_or_private

import redlease

SPAWN = multiprocessing.get_context("spawn")
PROCESSES, THREADS, RATE = 4, 2, 50
FAIR_WAIT = PROCESSES * THREADS / RATE  # s: one turn of every waiter, served in order
PYRATE = "pyrate-limiter RedisBucket"
VARIANTS: tuple[str, ...] = (
    "acquire",
    "hit + sleep retry_after",
    "hit + sleep retry_after + 20% jitter",
)
try:
    import pyrate_limiter
except ImportError:  # (the bench extra installs it)
    pyrate_limiter = None
else:
    VARIANTS += (PYRATE,)
RECORD = """
local t = redis.call('TIME')
return redis.call('RPUSH', KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])) .. ' ' .. ARGV[1])
"""


def worker(url: str, variant: str, name: str, start: Any, seconds: float) -> None:
    """One process: THREADS threads admitting calls until ``seconds`` have passed."""
    client = redis.Redis.from_url(url)
    limiter = redlease.RateLimiter(client, name, rate=f"{RATE}/second", algorithm="gcra")
    record = client.register_script(RECORD)
    pyrate = None
    if variant == PYRATE:
        rate = pyrate_limiter.Rate(RATE, pyrate_limiter.Duration.SECOND)
        pyrate = pyrate_limiter.Limiter(
            pyrate_limiter.RedisBucket.init([rate], client, f"{name}:pyrate")
        )
    record(keys=[f"{name}:warm"], args=[0])  # loaded before the clock starts
    start.wait(60)
    end = time.monotonic() + seconds

    def admit() -> None:
        for _ in range(100_000):  # bounded; the clock ends it
            began = time.monotonic()
            if began >= end:
                return
            if variant == "acquire":
                limiter.acquire("partner", timeout=30.0)
            elif pyrate is not None:
                pyrate.try_acquire("partner", blocking=True, timeout=30)
            else:
                jitter = 0.2 if "jitter" in variant else 0.0
                for _ in range(100_000):
                    answer = limiter.hit("partner")
                    if answer.allowed:
                        break
                    time.sleep(answer.retry_after * (1 + jitter * random.random()))
            record(keys=[f"{name}:admitted"], args=[round((time.monotonic() - began) * 1e6)])

    threads = [threading.Thread(target=admit) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds + 60)


def script_calls(client: redis.Redis) -> tuple[int, int]:
    """(EVAL + EVALSHA calls, every command) the server processed so far."""
    stats = client.info("commandstats")
    every = int(client.info("stats")["total_commands_processed"])
    return calls(stats, "eval") + calls(stats, "evalsha"), every


def run(url: str, variant: str, seconds: float) -> dict[str, float]:
    """One run of ``variant``: its figures."""
    client = redis.Redis.from_url(url)
    name = f"throttle{random.getrandbits(32):08x}"
    start = SPAWN.Event()
    procs = [
        SPAWN.Process(target=worker, args=(url, variant, name, start, seconds))
        for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    for _ in range(600):  # bounded: until every process loaded its script
        if client.llen(f"{name}:warm") >= PROCESSES:
            break
        time.sleep(0.05)
    before = script_calls(client)
    start.set()
    for p in procs:
        p.join(seconds + 90)
        if p.exitcode is None:
            p.kill()
    after = script_calls(client)
    used, commands = after[0] - before[0], after[1] - before[1] - 3  # (less this INFO)
    pairs = [item.split() for item in client.lrange(f"{name}:admitted", 0, -1)]
    client.delete(f"{name}:admitted", f"{name}:warm")
    client.close()
    admitted = sorted(int(t) for t, _ in pairs)
    waits = sorted(int(w) / 1e6 for _, w in pairs)
    return figures(admitted, waits, used, commands)


def figures(admitted: list[int], waits: list[float], used: int, commands: int) -> dict[str, float]:
    """use, calls/admission, peak 100 ms, gap p99 and the longest wait (see the docstring)."""
    steady = [t for t in admitted if t >= admitted[0] + 1_000_000]
    span = (steady[-1] - steady[0]) / 1e6 if len(steady) > 1 else float("nan")
    peak, j = 0, 0
    for i, t in enumerate(steady):  # the most admissions in any 100 ms
        while steady[j] <= t - 100_000:
            j += 1
        peak = max(peak, i - j + 1)
    gaps = [b - a for a, b in itertools.pairwise(steady)]
    p99 = statistics.quantiles(gaps, n=100)[98] if len(gaps) > 2 else float("nan")
    return {
        "admitted": len(admitted),
        "use": (len(steady) - 1) / span / RATE,
        "calls": (used - len(admitted)) / len(admitted),
        "commands": (commands - len(admitted)) / len(admitted),
        "peak": peak / (RATE * 0.1),
        "gap_p99": p99 / (1e6 / RATE),
        "wait_max": waits[-1] / FAIR_WAIT,
    }


def main() -> None:
    parser = config.parser(__doc__, paragraph=False)
    config.add_url(parser, "a server to use (default: a private one)")
    config.add_quick(parser, "one round of 4 s")
    args = parser.parse_args()
    rounds, seconds = (1, 4.0) if args.quick else (2, 8.0)
    with url_or_private(args.url) as url:
        load = os.getloadavg()[0]
        print(f"load average before: {load:.2f}; {PROCESSES} processes x {THREADS} threads, "
              f"{RATE}/second gcra, {rounds} round(s) of {seconds:.0f} s")  # fmt: skip
        samples: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        for r in range(rounds):
            order = VARIANTS if r % 2 == 0 else VARIANTS[::-1]
            for variant in order:
                samples[variant].append(run(url, variant, seconds))
        rows = {v: {k: statistics.median(s[k] for s in samples[v]) for k in s[0]}
                for v, s in samples.items()}  # fmt: skip
        base = rows["acquire"]
        print(f"\n{'row':<40}{'use':>6}{'calls/adm':>11}{'cmds/adm':>10}{'peak 100ms':>12}"
              f"{'gap p99':>9}{'wait max':>10}{'cmds ÷ acquire':>16}"
              f"{'wait max ÷ acquire':>20}")  # fmt: skip
        for variant, row in rows.items():
            print(f"{variant:<40}{row['use']:>6.2f}{row['calls']:>11.2f}{row['commands']:>10.2f}"
                  f"{row['peak']:>11.1f}x{row['gap_p99']:>8.1f}x{row['wait_max']:>9.1f}x"
                  f"{row['commands'] / base['commands']:>15.1f}x"
                  f"{row['wait_max'] / base['wait_max']:>19.2f}x")  # fmt: skip
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
