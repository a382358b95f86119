"""Exclusion between real processes on the Redis Cluster fixture: the 8 x 200 counter.

As in ``test_processes.py``: 8 processes each do 200 read-modify-writes (GET, then SET) of one
counter under one lock. Here the counter and the lock live on a Redis Cluster, in different
slots (so, most likely, on different masters), reached through ``RedisCluster`` clients.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import time
from typing import Any

import pytest
import redis.asyncio.cluster
import redis.cluster

import redlease
import redlease.asyncio
from redlease.server import HOST
from tests.topology import RedisClusterServers

pytestmark = pytest.mark.timeout(180)
SPAWN = multiprocessing.get_context("spawn")
WORKERS, INCREMENTS = 8, 200
COUNTER = "{counter}:n"


def count(ports: list[int], mode: str, locked: bool, start: Any) -> None:
    """One worker: INCREMENTS read-modify-writes of the counter, under the lock if ``locked``."""
    if mode == "asyncio":
        asyncio.run(_count_async(ports, locked, start))
        return
    nodes = [redis.cluster.ClusterNode(HOST, p) for p in ports]  # type: ignore[no-untyped-call]
    client = redis.cluster.RedisCluster(startup_nodes=nodes)
    lock = redlease.Lock(client, "counter", ttl=5.0)
    start.wait(30)
    for _ in range(INCREMENTS):
        if locked:
            lock.acquire()
        value = int(client.get(COUNTER) or 0)
        time.sleep(0.0002)  # a realistic gap between the read and the write
        client.set(COUNTER, value + 1)
        if locked:
            lock.release()
    client.close()


async def _count_async(ports: list[int], locked: bool, start: Any) -> None:
    nodes = [redis.asyncio.cluster.ClusterNode(HOST, p) for p in ports]
    client = redis.asyncio.cluster.RedisCluster(startup_nodes=nodes)
    lock = redlease.asyncio.Lock(client, "counter", ttl=5.0)
    start.wait(30)
    for _ in range(INCREMENTS):
        if locked:
            await lock.acquire()
        value = int(await client.get(COUNTER) or 0)
        await asyncio.sleep(0.0002)
        await client.set(COUNTER, value + 1)
        if locked:
            await lock.release()
    await client.aclose()


def run_counter(cluster: RedisClusterServers, mode: str, locked: bool) -> int:
    ports = [srv.port for srv in cluster.nodes]
    start = SPAWN.Event()
    workers = [
        SPAWN.Process(target=count, args=(ports, mode, locked, start)) for _ in range(WORKERS)
    ]
    for w in workers:
        w.start()
    start.set()
    for w in workers:
        w.join(150)
    assert all(w.exitcode == 0 for w in workers), [w.exitcode for w in workers]
    with cluster.master_of(COUNTER).client() as conn:
        return int(conn.get(COUNTER) or 0)


@pytest.mark.parametrize("mode", ["sync", "asyncio"])
def test_lock_makes_read_modify_write_exact_on_a_cluster(
    cluster: RedisClusterServers, mode: str
) -> None:
    assert run_counter(cluster, mode, locked=True) == WORKERS * INCREMENTS


def test_without_the_lock_updates_are_lost_on_a_cluster(cluster: RedisClusterServers) -> None:
    """The twin: the same workers without the lock lose updates, so the test above can fail."""
    assert run_counter(cluster, "sync", locked=False) < WORKERS * INCREMENTS
