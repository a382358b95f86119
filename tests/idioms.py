"""The idioms suite: the code users really write, mixed at random against one server.

Seeded (``REDLEASE_IDIOMS_SEED`` replays a run; the seed is printed) and bounded (a few seconds
of traffic per part). Workers take Lock, RLock, Semaphore and ReadWriteLock handles through
the idioms of issue 23: asyncio ``wait_for`` with short timeouts, ``asyncio.timeout``,
``gather``, ``create_task``, ``shield`` and cancellation (the lock is released by the code that
awaited it); threads sharing handles; ``fork`` while holding (the child owns nothing); while
connections are killed (``CLIENT KILL``) and a slow ``on_lost`` runs. Checked:

* exclusion: each critical section enters and leaves through a script on the server that
  counts the holders of each name (and the other side, for a ReadWriteLock), and the fences of
  a Lock's successive holders strictly increase;
* no lease outlives its handle: a handle dropped without ``release()`` stops being renewed,
  and a new handle gets the name within the ttl;
* the keeper's lease is never lost (none of these locks is ever stolen; a worker's may run
  out when kills keep failing its renewals on a loaded machine: counted, "release: lost" or
  "re-entry: lost", not a failure), and nothing is left behind: no redlease thread or task
  after ``close()``, every name free at the end.

This module holds its settings, the server-side exclusion check, the handles of each kind,
and the report of a run; the tests are in tests/test_idioms_asyncio.py and
tests/test_idioms_threads.py.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from typing import Any

import redis

import redlease
import redlease.asyncio as aredlease
from redlease._core.lock import LockKeys
from tests.topology import RedisServer

SEED = int(os.environ.get("REDLEASE_IDIOMS_SEED") or random.randrange(2**32))
RUN = 4.0  # seconds of mixed traffic per part
TTL = 3.0  # the leases of the locks under the exclusion check
DROP_TTL = 1.0  # the leases of the handles dropped without release
SLACK = 1.5  # a loaded machine's allowance on top of a lease
SLOW = 3.5  # seconds the slow on_lost blocks: longer than TTL
KINDS = ("lock", "rlock", "semaphore", "read", "write")
LIMIT = {"lock": 1, "rlock": 1, "semaphore": 2, "read": 1000, "write": 1}

# enter: count this holder on its side; a violation if the side is over its limit or the
# other side is held (a ReadWriteLock). KEYS: side, other side, violations; ARGV: limit.
ENTER = """
local n = redis.call('INCR', KEYS[1])
local other = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > tonumber(ARGV[1]) or other > 0 then redis.call('INCR', KEYS[3]) end
return n
"""


def checker_of(kind: str) -> str:
    """The kind of handle that cannot take the name while a dropped ``kind`` holds it."""
    return "write" if kind == "read" else kind


def lock_key(name: str) -> bytes:
    return LockKeys.build("redlease", name.encode()).lock


def names(kind: str, part: str) -> tuple[str, str, str]:
    """(lock name, counter key of its side, counter key of the other side)."""
    name = "rw" if kind in ("read", "write") else kind
    other = {"read": "write", "write": "read"}.get(kind, "none")
    base = f"idioms:{SEED}:{part}"
    return f"{base}:{name}", f"{base}:cs:{kind}", f"{base}:cs:{other}"


class Tally:
    """What a part saw (for the report and the checks)."""

    def __init__(self) -> None:
        self.sections = 0
        self.fences: list[int] = []
        self.errors: list[str] = []  # failures: a lost lease, an unexpected error
        self.counts: dict[str, int] = {}
        self.dropped: list[tuple[str, float]] = []  # (kind, when its handle was dropped)
        self.guard = threading.Lock()

    def count(self, what: str) -> None:
        with self.guard:
            self.counts[what] = self.counts.get(what, 0) + 1

    def failed(self, what: str) -> None:
        with self.guard:
            self.errors.append(what)


def report(part: str, tally: Tally) -> str:
    return (
        f"{part}: seed {SEED} (REDLEASE_IDIOMS_SEED={SEED} replays it), {tally.sections} "
        f"critical sections, {sorted(tally.counts.items())}, "
        f"failures {sorted(set(tally.errors))[:8]}"
    )


def kill_connections(admin: redis.Redis, rng: random.Random, tally: Tally) -> None:
    """CLIENT KILL the workers' connections (normal or pub/sub), not the checker's."""
    kind = rng.choice(["normal", "pubsub"])
    for conn in admin.client_list(_type=kind):
        if conn.get("name") == "idioms-worker":
            try:
                admin.client_kill_filter(_id=conn["id"])
                tally.count(f"killed {kind}")
            except redis.ResponseError:  # gone meanwhile
                pass


def worker_clients(srv: RedisServer) -> tuple[redis.Redis, redis.Redis]:
    """(admin, checker): never killed (named apart from the workers' connections)."""
    admin = redis.Redis(host=srv.host, port=srv.port, client_name="idioms-admin")
    checker = redis.Redis(host=srv.host, port=srv.port, client_name="idioms-checker")
    return admin, checker


def check_end(checker: redis.Redis, part: str, tally: Tally) -> None:
    why = report(part, tally)
    print(why)
    assert not tally.errors, why
    assert int(checker.get(f"idioms:{SEED}:{part}:violations") or 0) == 0, why
    assert tally.fences == sorted(set(tally.fences)), f"fences not increasing: {why}"
    assert tally.sections > 10, why  # the run did something


def async_handle(client: Any, kind: str, name: str, ttl: float, on_lost: Any = None) -> Any:
    if kind == "lock":
        return aredlease.Lock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "rlock":
        return aredlease.RLock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "semaphore":
        return aredlease.Semaphore(client, name, 2 if ttl == TTL else 1, ttl=ttl)
    rw = aredlease.ReadWriteLock(client, name, ttl=ttl)
    return rw.read if kind == "read" else rw.write


def sync_handle(client: Any, kind: str, name: str, ttl: float, on_lost: Any = None) -> Any:
    if kind == "lock":
        return redlease.Lock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "rlock":
        return redlease.RLock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "semaphore":
        return redlease.Semaphore(client, name, 2 if ttl == TTL else 1, ttl=ttl)
    rw = redlease.ReadWriteLock(client, name, ttl=ttl)
    return rw.read if kind == "read" else rw.write


def wait_child(pid: int, limit: float = 20.0) -> int:
    """The child's exit status, killing it if it is not done within ``limit`` seconds."""
    stop = time.monotonic() + limit
    while time.monotonic() < stop:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -9


def sync_taken(handle: Any, since: float, ttl: float = DROP_TTL) -> bool:
    """Whether ``handle`` gets its name within ``ttl`` + SLACK of ``since`` (then it holds it)."""
    for _ in range(3):  # a connection the killer closed fails the call that reuses it
        left = max(since + ttl + SLACK - time.monotonic(), 0.1)
        try:
            return bool(handle.acquire(timeout=left))
        except redlease.Unavailable:
            continue
    return False
