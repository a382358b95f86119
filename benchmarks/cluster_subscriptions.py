"""Pub/sub connections per cluster node while many locks are waited on (issue 9).

50 locks held, one asyncio waiter on each (one process, one client): how many connections of
each master carry a sharded subscription (CLIENT LIST ``ssub>0``), and how many commands the
waiters send per second while blocked (INFO commandstats, every node, over 2 s).

    .venv/bin/python benchmarks/cluster_subscriptions.py [--locks 50]

Starts its own 3-master + 3-replica cluster (loopback, free ports); bounded: every wait has a
timeout, and the cluster is stopped on the way out.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections import Counter
from typing import Any

import redis
from harness.servers import topology

import redlease.asyncio as redlease
from redlease._core.lock import LockKeys

_WAITER_COMMANDS = ("cmdstat_evalsha", "cmdstat_eval", "cmdstat_ssubscribe", "cmdstat_subscribe")


def subscribed_connections(cluster: Any) -> dict[int, int]:
    """Per master port: connections with at least one sharded subscription."""
    counts = {}
    for srv in cluster.masters:
        with srv.client() as conn:
            clients = conn.client_list()
        counts[srv.port] = sum(1 for c in clients if int(c.get("ssub", 0) or 0) > 0)
    return counts


def commands(cluster: Any) -> Counter[str]:
    total: Counter[str] = Counter()
    for srv in cluster.nodes:
        with srv.client() as conn:
            stats = conn.info("commandstats")
        total.update({k: int(v["calls"]) for k, v in stats.items() if k in _WAITER_COMMANDS})
    return total


async def measure(cluster: Any, n: int) -> None:
    client = cluster.async_client()
    names = [f"sub:{i}" for i in range(n)]
    held = asyncio.Event()
    done = asyncio.Event()

    async def holder() -> None:
        locks = [redlease.Lock(client, name, ttl=30.0) for name in names]
        for lock in locks:
            assert await lock.acquire(blocking=False)
        held.set()
        await asyncio.wait_for(done.wait(), 60)
        for lock in locks:
            await lock.release()

    async def waiter(name: str) -> bool:
        await held.wait()
        lock = redlease.Lock(client, name, ttl=30.0)
        got = await lock.acquire(timeout=40.0)
        if got:
            await lock.release()
        return got

    task = asyncio.create_task(holder())
    waiters = [asyncio.create_task(waiter(name)) for name in names]
    with redis.cluster.RedisCluster(
        host=cluster.masters[0].host, port=cluster.masters[0].port
    ) as rc:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            queued = sum(rc.zcard(LockKeys.build("redlease", nm.encode()).queue) for nm in names)
            if queued == n:
                break
            await asyncio.sleep(0.1)
    await asyncio.sleep(1.0)  # every waiter subscribed and asleep
    per_node = await asyncio.to_thread(subscribed_connections, cluster)
    before = await asyncio.to_thread(commands, cluster)
    await asyncio.sleep(2.0)
    sent = await asyncio.to_thread(commands, cluster) - before
    done.set()
    results = await asyncio.gather(*waiters)
    await task
    print(f"{n} waiters on {n} locks, 3 masters")
    print(f"  connections with a sharded subscription, per master: {sorted(per_node.values())}")
    print(f"  total: {sum(per_node.values())}")
    print(f"  commands sent by the blocked waiters in 2 s: {dict(sent) or 0}")
    print(f"  every waiter got its lock after the release: {all(results)}")
    await redlease.close(client)
    await client.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--locks", type=int, default=50)
    args = parser.parse_args()
    with topology().RedisClusterServers(masters=3, replicas_per_master=1) as cluster:
        asyncio.run(measure(cluster, args.locks))


if __name__ == "__main__":
    main()
