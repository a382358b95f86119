"""One chaos worker process: acquire -> fenced write -> release, in a loop, logging a history.

Started with the ``spawn`` context by :mod:`tests.chaos.harness`. It uses only the public
API: ``redlease.Lock`` (or ``redlease.Redlock``) through the proxies, and
``redlease.FencedStore`` on the resource server (never faulted, reached directly). The twin
(``fenced=False``) writes the same data without the fence check: a ``MULTI`` that bumps the
version and sets the value.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from typing import IO, Any

import redis
import redis.cluster
from redis.exceptions import RedisError

import redlease
from redlease._core.fencing import FencedKeys

IDLE, WORKING, WRITTEN = 0, 1, 2
"""Values of the worker's slot in the shared state array (the injector pauses WORKING ones)."""


@dataclass(frozen=True)
class WorkerConfig:
    """What a worker needs (picklable)."""

    worker: str
    slot: int
    lock_urls: tuple[str, ...]  # one: Lock; several: Redlock over all
    cluster_ports: tuple[int, ...]  # not empty: a Lock on the cluster of these nodes
    resource_url: str
    names: tuple[str, ...]
    ttl: float
    fenced: bool
    history: str  # path of this worker's JSON-lines file
    seed: int
    socket_timeout: float = 0.25
    server_timeout: float = 0.25  # Redlock's per-server deadline
    acquire_timeout: float = 2.0
    work: float = 0.004  # seconds between the acquire and the write


def run(config: WorkerConfig, state: Any, ops: Any, stop: Any) -> None:
    """The worker's main: loop until ``stop.value`` is set, counting ops in ``ops[slot]``.

    Both are shared memory WITHOUT a lock: this process is SIGSTOPped and SIGKILLed at random,
    and a lock it held then (a multiprocessing Event's, a synchronized Value's) would stay
    held, and the parent would hang on it. Each slot has one writer at a time.
    """
    rng = random.Random(config.seed)
    kwargs = {"socket_timeout": config.socket_timeout, "socket_connect_timeout": 0.5}
    clients: list[Any] = [redis.Redis.from_url(u, **kwargs) for u in config.lock_urls]
    if config.cluster_ports:
        nodes = [redis.cluster.ClusterNode("127.0.0.1", p) for p in config.cluster_ports]
        clients = [redis.cluster.RedisCluster(startup_nodes=nodes, **kwargs)]
    resource = redis.Redis.from_url(config.resource_url, socket_timeout=10.0)
    locks: dict[str, Any] = {}
    stores: dict[str, redlease.FencedStore] = {}
    for name in config.names:
        if len(clients) == 1:
            locks[name] = redlease.Lock(clients[0], name, ttl=config.ttl)
        else:
            locks[name] = redlease.Redlock(
                clients, name, ttl=config.ttl, server_timeout=config.server_timeout
            )
        stores[name] = redlease.FencedStore(resource, name)
    with open(config.history, "a", buffering=1) as out:
        hold = 0
        while not stop.value:
            name = rng.choice(config.names)
            if _one(config, rng, out, resource, locks[name], stores[name], name, hold, state):
                hold += 1
                ops[config.slot] += 1


def _log(out: IO[str], **event: Any) -> None:
    out.write(json.dumps(event, separators=(",", ":")) + "\n")


def _now(resource: redis.Redis) -> int:
    seconds, micros = resource.time()
    return int(seconds) * 1_000_000 + int(micros)


def _one(
    config: WorkerConfig,
    rng: random.Random,
    out: IO[str],
    resource: redis.Redis,
    lock: Any,
    store: redlease.FencedStore,
    name: str,
    hold: int,
    state: Any,
) -> bool:
    """One acquire -> write -> release; True if the lock was acquired."""
    w = config.worker
    try:
        if not lock.acquire(timeout=config.acquire_timeout):
            _log(out, ev="error", w=w, what="acquire timed out")
            return False
    except redlease.LockUnavailable:
        _log(out, ev="error", w=w, what="acquire unavailable")
        time.sleep(rng.uniform(0.01, 0.05))
        return False
    fence = lock.fence
    validity = getattr(lock, "validity", None)  # Redlock: what is left of the lease (s)
    _log(out, ev="acq", w=w, h=hold, name=name, fence=fence, t=_now(resource), v=validity)
    state[config.slot] = WORKING
    time.sleep(config.work * rng.uniform(0.5, 1.5))  # the window a pause lands in
    value = f"{w}:{hold}:{fence}"
    if config.fenced:
        try:
            version = store.write(fence, value)
            _log(out, ev="write", w=w, h=hold, name=name, fence=fence, ok=True, version=version)
        except redlease.StaleFence as exc:
            _log(out, ev="write", w=w, h=hold, name=name, fence=fence, ok=False, high=exc.highest)
    else:
        version = _unfenced_write(resource, name, value)
        _log(out, ev="write", w=w, h=hold, name=name, fence=fence, ok=True, version=version)
    state[config.slot] = WRITTEN
    end = _now(resource)
    try:
        lock.release()
        outcome = "released"
    except redlease.LockLost:
        outcome = "lost"
    except (redlease.LockUnavailable, RedisError):
        outcome = "unavailable"
    state[config.slot] = IDLE
    _log(out, ev="rel", w=w, h=hold, t=end, outcome=outcome)
    return True


def _unfenced_write(resource: redis.Redis, name: str, value: str) -> int:
    """The twin's write: the same keys and version count, no fence check."""
    keys = FencedKeys.build("redlease", name.encode())
    pipe = resource.pipeline(transaction=True)
    pipe.hincrby(keys.meta, "version", 1)
    pipe.hset(keys.data, "value", value)
    version, _ = pipe.execute()
    return int(version)
