"""RateLimiter.acquire across processes: 4 processes x 2 threads wait on one ``20/second``
GCRA limit for about 5 s. Every admission is recorded in Redis on the server's clock.

Checked: the admissions in each 1-second window (server time) stay within the limit plus
its burst, the full windows use at least 0.8 of the rate on average, and the waiters cost
one script call per admission (nothing while they sleep, no retries; counted with
``INFO commandstats``, so that what a script runs inside is not counted). The twin runs the same
load through a sleep-and-retry loop over ``hit()``: waiters woken together collide, and the
command count shows the retries.
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections import Counter
from typing import Any

import pytest
import redis

import redlease

pytestmark = pytest.mark.timeout(120)
SPAWN = multiprocessing.get_context("spawn")
PROCESSES, THREADS, SECONDS = 4, 2, 5.0
LIMIT = 20  # per second; GCRA's burst is the limit too
OVERHEAD = 10  # script calls per process besides the two per admission (loading them)
RECORD = """
local t = redis.call('TIME')
return redis.call('RPUSH', KEYS[1], t[1] .. string.format('%06d', tonumber(t[2])))
"""


def worker(url: str, mode: str, start: Any, seconds: float) -> None:
    """One process: THREADS threads admitting calls until ``seconds`` have passed."""
    client = redis.Redis.from_url(url)
    limiter = redlease.RateLimiter(client, "partner", rate=f"{LIMIT}/second", algorithm="gcra")
    record = client.register_script(RECORD)
    start.wait(30)
    end = time.monotonic() + seconds

    def admit() -> None:
        for _ in range(10_000):  # bounded; the clock ends it
            if time.monotonic() >= end:
                return
            if mode == "acquire":
                limiter.acquire("api", timeout=10.0)
            else:
                for _ in range(10_000):  # the sleep-and-retry loop users write over hit()
                    answer = limiter.hit("api")
                    if answer.allowed:
                        break
                    time.sleep(answer.retry_after)
            record(keys=["admitted"])

    threads = [threading.Thread(target=admit) for _ in range(THREADS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)


def script_calls(client: redis.Redis) -> int:
    """Script calls the server ran (EVAL, EVALSHA), not the commands they ran inside."""
    stats = client.info("commandstats")
    return sum(int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("eval", "evalsha"))


def run(url: str, mode: str) -> tuple[list[int], int]:
    """Admission times (server us) and the script calls the clients made meanwhile."""
    client = redis.Redis.from_url(url)
    client.flushall()
    before = script_calls(client)
    start = SPAWN.Event()
    procs = [
        SPAWN.Process(target=worker, args=(url, mode, start, SECONDS)) for _ in range(PROCESSES)
    ]
    for p in procs:
        p.start()
    time.sleep(1.0)  # let them import and connect
    start.set()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    commands = script_calls(client) - before
    admitted = sorted(int(t) for t in client.lrange("admitted", 0, -1))
    client.close()
    return admitted, commands


def problems(admitted: list[int], commands: int) -> list[str]:
    """What is wrong with a run (empty: nothing)."""
    found = []
    windows = Counter(t // 1_000_000 for t in admitted)
    for window, count in sorted(windows.items()):
        if count > 2 * LIMIT:  # the limit, plus the burst
            found.append(f"window {window}: {count} admitted, above {2 * LIMIT}")
    full = [windows[w] for w in range(min(windows) + 1, max(windows))]
    if not full or sum(full) / len(full) < 0.8 * LIMIT:
        found.append(f"full windows {full}: below 0.8 x {LIMIT} on average")
    extra = commands - 2 * len(admitted)
    if extra > OVERHEAD * PROCESSES:
        found.append(f"{extra} script calls besides one reservation and one record each")
    return found


def test_twin_problems_sees_a_burst_and_idle_windows() -> None:
    second = 1_000_000
    good = [w * second + i * (second // LIMIT) for w in range(5) for i in range(LIMIT)]
    assert problems(good, 2 * len(good)) == []
    burst = good + [2 * second + 1] * (LIMIT + 1)
    assert problems(burst, 2 * len(burst))[0].startswith("window 2:")
    idle = [t for t in good if t // second != 2]
    assert "below 0.8" in problems(idle, 2 * len(idle))[0]


def test_acquire_spreads_waiters_within_the_limit(make_server: Any) -> None:
    srv = make_server()
    admitted, commands = run(f"redis://{srv.host}:{srv.port}/0", "acquire")
    assert problems(admitted, commands) == []


def test_twin_a_sleep_and_retry_loop_over_hit_collides(make_server: Any) -> None:
    srv = make_server()
    admitted, commands = run(f"redis://{srv.host}:{srv.port}/0", "retry")
    found = problems(admitted, commands)
    assert any("script calls besides" in p for p in found), found
