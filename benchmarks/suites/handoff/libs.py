"""The libraries under test, each with its defaults, in one process (``Side``); the clients
for a server or a ``redis+cluster://`` cluster; and the probes that read the servers."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from typing import Any

from harness.cpu import server_cpu
from harness.locks import wait_once
from harness.servers import calls
from harness.spawn import now_ns
from harness.timing import close_loop

LIBS: dict[str, str] = {
    "redlease": "redlease Lock",
    "redlease-async": "redlease.asyncio Lock",
    "redlease-barging": "redlease Lock(fair=False)",
    "redis-py": "redis-py Lock (sleep=0.1)",
    "redlease-compat": "redis-py's API on redlease (lock_class=redlease.compat.Lock)",
    "python-redis-lock": "python-redis-lock",
    "fifo-floor": "floor: one token, BLPOP/RPUSH",
}
ASYNC_LIBS = {"redlease-async"}
MINE = ("redlease", "redlease-async")
DIAG_NORENEW = "redlease-norenew"  # section 1 only: redlease.Lock(renew=False), a diagnostic row


def make_sync_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    """A lock object with ``acquire()`` / ``release()``: each library with its defaults."""
    if lib == "redlease":
        import redlease

        return redlease.Lock(client, name, ttl=ttl)
    if lib == "redlease-barging":
        import redlease

        return redlease.Lock(client, name, ttl=ttl, fair=False)
    if lib == "redis-py":
        return client.lock(name, timeout=ttl)
    if lib == "redlease-compat":
        import redlease.compat

        return client.lock(name, timeout=ttl, lock_class=redlease.compat.Lock)
    if lib == "python-redis-lock":
        import redis_lock

        return redis_lock.Lock(client, name, expire=int(ttl))
    if lib == "fifo-floor":
        return FifoFloor(client, name)
    raise ValueError(f"unknown sync library {lib!r}")


class FifoFloor:
    """The floor of a fair hand-off on this machine: not a lock library but one token in a
    Redis list, taken with BLPOP (Redis serves blocked clients first come, first served) and
    put back with RPUSH. No lease, no fence, no crash recovery: one command per side and one
    wake-up of the waiting process. Its longest wait in section 2 is what the scheduler of
    this machine alone costs a FIFO queue of N processes (for ``--sections 2``)."""

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._key = f"{name}:fifo"
        if client.set(f"{name}:fifo-init", 1, nx=True):  # the first process puts the token
            client.rpush(self._key, b"t")

    def acquire(self) -> bool:
        self._client.blpop([self._key], 0)
        return True

    def release(self) -> None:
        self._client.rpush(self._key, b"t")


def make_async_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    if lib == "redlease-async":
        import redlease.asyncio

        return redlease.asyncio.Lock(client, name, ttl=ttl)
    raise ValueError(f"unknown asyncio library {lib!r}")


def lease_key(lib: str, name: str) -> str:
    """The Redis key whose PTTL is the holder's lease, per library."""
    if lib in ("redlease", "redlease-async", "redlease-barging", "redlease-compat"):
        return f"redlease:{{{name}}}:lock"
    if lib == "redis-py":
        return name
    if lib == "python-redis-lock":
        return f"lock:{name}"
    raise ValueError(lib)


# A URL ``redis+cluster://host:port`` names a Redis Cluster by one of its nodes: the clients
# built for it are ``RedisCluster`` clients (they learn the other nodes from that one). Only
# what goes through Side (the lock processes) understands it; benchmarks/cluster.py uses it.
CLUSTER_SCHEME = "redis+cluster://"  # the CLI's form (redlease --url redis+cluster://...)


def cluster_url(node_url: str) -> str:
    """The cluster URL naming the cluster of the node at ``node_url`` (``redis://h:p``)."""
    return CLUSTER_SCHEME + node_url.split("://", 1)[1]


def _node_url(url: str) -> str:
    return "redis://" + url[len(CLUSTER_SCHEME) :]


def sync_client(url: str) -> Any:
    """A sync client for ``url``: ``redis.Redis``, or ``RedisCluster`` for ``redis+cluster://``."""
    if url.startswith(CLUSTER_SCHEME):
        import redis.cluster

        return redis.cluster.RedisCluster.from_url(_node_url(url))
    import redis

    return redis.Redis.from_url(url)


def async_client(url: str) -> Any:
    """The asyncio client for ``url`` (``redis.asyncio.cluster.RedisCluster`` for a cluster)."""
    if url.startswith(CLUSTER_SCHEME):
        import redis.asyncio.cluster

        return redis.asyncio.cluster.RedisCluster.from_url(_node_url(url))
    import redis.asyncio

    return redis.asyncio.Redis.from_url(url)


class Side:
    """One library in one process: its client, plus a private event loop for asyncio.

    asyncio locks belong to the task that acquired them, so every acquire+release pair of an
    asyncio library runs inside one coroutine (one task); sync libraries are called directly.
    """

    def __init__(self, lib: str, url: str) -> None:
        self.lib = lib
        self.is_async = lib in ASYNC_LIBS
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self.loop = asyncio.new_event_loop()
            self.client = self.loop.run_until_complete(make_async_client(url))
        else:
            self.client = sync_client(url)

    def lock(self, name: str, ttl: float) -> Any:
        if self.is_async:
            return make_async_lock(self.lib, self.client, name, ttl)
        return make_sync_lock(self.lib, self.client, name, ttl)

    def ready(self, name: str, ttl: float, events: Any, wid: int) -> Any:
        """Warm up (on another lock), then the lock to measure; reported ready on ``events``."""
        warm_up(self, name)
        lock = self.lock(name, ttl)
        events.put(("ready", wid))
        return lock

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def once(self, lock: Any, hold: Any = None, hold_s: float = 0.0, on_held: Any = None) -> tuple:
        """Acquire (blocking, library defaults), optionally hold until the flag ``hold`` is set
        (at most ``hold_s`` seconds, the loop keeps running), release.

        Returns ``(t_call, t_acq, ok)`` on the system-wide monotonic clock.
        """
        if self.is_async:
            return self.run(self._once_async(lock, hold, hold_s, on_held))
        t_call = now_ns()
        ok = bool(lock.acquire())
        t_acq = now_ns()
        if on_held is not None:
            on_held(t_call, t_acq, ok)
        if hold is not None:
            end = time.monotonic() + hold_s
            while time.monotonic() < end and not hold.value:
                time.sleep(0.02)
        if ok:
            lock.release()
        return t_call, t_acq, ok

    async def _once_async(self, lock: Any, hold: Any, hold_s: float, on_held: Any) -> tuple:
        t_call = now_ns()
        ok = bool(await lock.acquire())
        t_acq = now_ns()
        if on_held is not None:
            on_held(t_call, t_acq, ok)
        if hold is not None:
            end = time.monotonic() + hold_s
            while time.monotonic() < end and not hold.value:
                await asyncio.sleep(0.02)  # the loop runs: watchdog and hub keep working
        if ok:
            await lock.release()
        return t_call, t_acq, ok

    def close(self) -> None:
        if self.loop is None:
            with contextlib.suppress(Exception):
                self.client.close()
            return
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.client.aclose(), 5))
        close_loop(self.loop)
        self.loop = None


async def make_async_client(url: str) -> Any:
    """The asyncio client for ``url``, made inside the running loop."""
    return async_client(url)


def warm_up(side: Side, name: str) -> None:
    """Connect, load scripts, start background helpers, and wait once (see ``wait_once``): on
    a lock nobody else uses."""
    lock = side.lock(f"{name}:warm:{os.getpid()}", 10.0)
    for _ in range(3):
        side.once(lock)
    wait_once(side.lock(f"{name}:warm:{os.getpid()}", 10.0), lock, side.loop)


def server_probes(url: str) -> list[Any]:
    """A plain client for each server behind ``url``: the one server, or every node (masters
    and replicas) of a ``redis+cluster://`` cluster, whose CPU then counts in full."""
    import redis

    if not url.startswith(CLUSTER_SCHEME):
        return [redis.Redis.from_url(url)]
    cluster = sync_client(url)
    try:
        return [redis.Redis(host=node.host, port=node.port) for node in cluster.get_nodes()]
    finally:
        cluster.close()


# Commands counted per acquisition in section 2 (INFO commandstats; commands a script runs
# count too): scripts, wake-up messages, queue joins (a refused attempt of a blocked waiter).
COUNTED = {"evalsha": "scripts", "publish": "PUBLISH", "spublish": "PUBLISH", "zadd": "ZADD"}


def server_counters(probe: Any) -> tuple[float, dict[str, int]]:
    """The server's CPU seconds, and its calls of each command in :data:`COUNTED`."""
    stats = probe.info("commandstats")
    counted = {name: 0 for name in set(COUNTED.values())}
    for command, label in COUNTED.items():
        counted[label] += calls(stats, command)
    return server_cpu(probe), counted
