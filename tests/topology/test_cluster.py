"""Smoke tests of the Redis Cluster topology (tests.topology.RedisClusterServers)."""

from __future__ import annotations

import itertools
import time

import pytest
import redis
import redis.asyncio.cluster
import redis.cluster

from tests.topology import SLOTS, RedisClusterServers, key_slot
from tests.topology._common import poll
from tests.topology.server import RedisServer


def _keys_per_master(cluster: RedisClusterServers, count: int) -> dict[int, list[str]]:
    """``count`` distinct keys grouped by the port of the master that owns them."""
    groups: dict[int, list[str]] = {}
    for i in range(count):
        key = f"{{k{i}}}:v"
        groups.setdefault(cluster.master_of(key).port, []).append(key)
    return groups


def test_slots_all_covered_by_three_masters_with_a_synced_replica_each(
    cluster: RedisClusterServers,
) -> None:
    masters = cluster.masters
    assert len(masters) == 3
    assert len(cluster.replicas) == 3
    assert all(len(cluster.replicas_of(master)) == 1 for master in masters)
    with masters[0].client() as conn:
        ranges = conn.execute_command("CLUSTER SLOTS")
    covered = sorted((int(r[0]), int(r[1])) for r in ranges)
    assert sum(hi - lo + 1 for lo, hi in covered) == SLOTS
    assert covered[0][0] == 0 and covered[-1][1] == SLOTS - 1
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(covered))


def test_cluster_client_puts_keys_on_every_master(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    groups = _keys_per_master(cluster, 30)
    assert len(groups) == 3, "30 hash tags should spread over all 3 masters"
    for keys in groups.values():
        for key in keys:
            cluster_client.set(key, key)
    for master in cluster.masters:
        with master.client() as conn:
            assert conn.dbsize() == len(groups[master.port])
    assert cluster_client.get(groups[cluster.masters[0].port][0]) is not None


async def test_async_cluster_client_reaches_every_master(
    cluster: RedisClusterServers, async_cluster_client: redis.asyncio.cluster.RedisCluster
) -> None:
    groups = _keys_per_master(cluster, 30)
    for keys in groups.values():
        await async_cluster_client.set(keys[0], "x")
    for master in cluster.masters:
        with master.client() as conn:
            assert conn.dbsize() == 1


def test_killing_a_master_promotes_its_replica_and_the_client_keeps_working(
    cluster: RedisClusterServers,
    cluster_client: redis.cluster.RedisCluster,
    topology_timings: list[str],
) -> None:
    key = "{lock}:failover"
    old = cluster.master_of(key)
    (replica,) = cluster.replicas_of(old)
    with old.client() as conn:  # WAIT counts this connection's writes: write on it
        conn.set(key, "held")
        assert conn.execute_command("WAIT", 1, 5000) == 1

    killed, promoted, seconds = cluster.kill_master_of(key)
    topology_timings.append(f"cluster failover of one shard (SIGKILL master): {seconds:.2f}s")

    assert killed is old and not old.running
    assert promoted is replica
    assert cluster.master_of(key) is replica
    assert cluster_client.get(key) == b"held"  # acknowledged write survived, client followed
    cluster_client.set(key, "after")
    assert cluster_client.get(key) == b"after"


def test_heal_brings_a_killed_master_back_as_a_replica(cluster: RedisClusterServers) -> None:
    key = "{lock}:heal"
    killed, promoted, _ = cluster.kill_master_of(key)
    cluster.heal()
    assert killed.running
    assert cluster.replicas_of(promoted) == [killed]
    assert len(cluster.masters) == 3


def _orphan_a_master(cluster: RedisClusterServers) -> RedisServer:
    """Move one master's replica under another master, as failovers can leave them."""
    first, second = cluster.masters[:2]
    (moved,) = cluster.replicas_of(second)
    with moved.client() as conn:
        conn.execute_command("CLUSTER REPLICATE", cluster.node_id(first))
    poll("the replica to move", lambda: True if not cluster.replicas_of(second) else None, 30)
    return second


def test_heal_gives_a_master_left_without_a_replica_one_again(
    cluster: RedisClusterServers,
) -> None:
    orphan = _orphan_a_master(cluster)
    cluster.heal()
    assert all(len(cluster.replicas_of(m)) == 1 for m in cluster.masters)
    assert orphan in cluster.masters


def test_twin_without_balancing_the_master_stays_alone(
    cluster: RedisClusterServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    orphan = _orphan_a_master(cluster)
    with monkeypatch.context() as patch:
        patch.setattr(RedisClusterServers, "_balance_replicas", lambda self: False)
        cluster.heal()
        assert cluster.replicas_of(orphan) == []
    cluster.heal()  # balanced again for the tests after


def test_migrating_a_slot_moves_its_keys_and_ttls_while_clients_follow(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    key = "{lock}:migrate"
    cluster_client.set(key, "token", px=60_000)
    source = cluster.master_of(key)
    target = next(m for m in cluster.masters if m is not source)

    slot = cluster.begin_migration(key, target)
    assert slot == key_slot(key)
    assert cluster_client.get(key) == b"token"  # still on the source during the migration
    assert cluster.migrate_keys(slot, target) == 1
    assert cluster_client.get(key) == b"token"  # now answered via -ASK on the target
    cluster.finish_migration(slot, target)

    assert cluster.master_of(key) is target
    assert cluster_client.get(key) == b"token"  # -MOVED, then the refreshed slot map
    assert 0 < cluster_client.pttl(key) <= 60_000
    with source.client() as conn:
        assert conn.dbsize() == 0


def test_slot_arguments_are_checked(cluster_servers: RedisClusterServers) -> None:
    with pytest.raises(ValueError, match="slot must be in"):
        cluster_servers.master_of(SLOTS)
    with pytest.raises(ValueError, match="masters must be"):
        RedisClusterServers(masters=0)


def test_graceful_failover_swaps_master_and_replica_without_losing_writes(
    cluster: RedisClusterServers,
    cluster_client: redis.cluster.RedisCluster,
    topology_timings: list[str],
) -> None:
    key = "{lock}:graceful"
    cluster_client.set(key, "held")
    old = cluster.master_of(key)
    (replica,) = cluster.replicas_of(old)
    began = time.monotonic()
    cluster.failover_to(replica)
    topology_timings.append(f"cluster graceful CLUSTER FAILOVER: {time.monotonic() - began:.2f}s")
    assert cluster.master_of(key) is replica
    # The old master's own view of its new role reaches the other nodes a gossip round later.
    poll(
        f"{old!r} to be seen as the replica of {replica!r}",
        lambda: True if cluster.replicas_of(replica) == [old] else None,
        10.0,
    )
    assert cluster_client.get(key) == b"held"  # CLUSTER FAILOVER waits for the replica to catch up
