"""``redlease inspect --all`` and ``redlease top`` on a Redis Cluster: every master is scanned.

The command line builds its client elsewhere (``cli._common.make_client``); these tests build
the ``RedisCluster`` client themselves and call what the subcommands call, ``scan_all`` and
``top.snapshot``, on the session's cluster (3 masters, 1 replica each).
"""

from __future__ import annotations

import os
import threading

import redis
import redis.cluster

import redlease
from redlease.cli.inspect import scan_all
from redlease.cli.top import snapshot
from tests.topology import RedisClusterServers

PREFIX = "clusterscan"
NAMES = [f"job:{i}" for i in range(12)]


def test_inspect_all_and_top_see_the_primitives_of_every_master(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    owners = {cluster.master_of(f"{PREFIX}:{{{name}}}:lock").port for name in NAMES}
    assert len(owners) == 3, "the names must spread over all 3 masters for the test to mean it"
    locks = [redlease.Lock(cluster_client, name, prefix=PREFIX, ttl=30) for name in NAMES]
    sem = redlease.Semaphore(cluster_client, "pool", 2, prefix=PREFIX, ttl=30)
    for lock in locks:
        assert lock.acquire(timeout=5)
    assert sem.acquire(timeout=5)
    try:
        found = scan_all(cluster_client, PREFIX, 1000)
        rows, scanned = snapshot(cluster_client, PREFIX)
        bounded = scan_all(cluster_client, PREFIX, 2)
        # The twin: a client of one master alone finds only that master's share.
        with cluster.masters[0].client() as one_master:
            partial = scan_all(one_master, PREFIX, 1000)
    finally:
        for lock in locks:
            lock.release()
        sem.release()
    assert {item["name"] for item in found} == {*NAMES, "pool"}
    assert 0 < len(partial) < len(found)
    assert len(bounded) == 2
    assert scanned == len(NAMES) + 1
    cells = {row.name: row.cells()[1:] for row in rows}
    assert set(cells) == {*NAMES, "pool"}
    held_by = f":{os.getpid()} {threading.current_thread().name}"  # host:pid thread
    assert all(cells[name][0] == "lock" and held_by in cells[name][1] for name in NAMES)
    assert cells["pool"][:2] == ("semaphore", "1/2 permits")
    after, _ = snapshot(cluster_client, PREFIX)  # released: nothing in use, fences remain
    assert after == []
    assert {row.name for row in snapshot(cluster_client, PREFIX, idle=True)[0]} == {
        *NAMES,
        "pool",
    }
