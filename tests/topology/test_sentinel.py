"""Smoke tests of the Sentinel topology (tests.topology.SentinelGroup)."""

from __future__ import annotations

from tests.topology import SentinelGroup


def test_sentinels_agree_on_a_master_with_two_synced_replicas(
    sentinel_group: SentinelGroup,
) -> None:
    assert len(sentinel_group.sentinel_addresses) == 3
    assert len(sentinel_group.replicas) == 2
    sentinel = sentinel_group.sentinel()
    host, port = sentinel.discover_master(sentinel_group.service)
    assert (host, port) == (sentinel_group.master.host, sentinel_group.master.port)
    assert len(sentinel.discover_slaves(sentinel_group.service)) == 2
    client = sentinel_group.master_for()
    assert client.ping()
    client.close()


def test_killed_master_is_replaced_and_master_for_client_follows(
    sentinel_group: SentinelGroup, topology_timings: list[str]
) -> None:
    client = sentinel_group.master_for(decode_responses=True)
    client.set("k", "before")
    with sentinel_group.master.client() as conn:
        conn.set("acked", "yes")  # WAIT counts this connection's writes
        assert conn.execute_command("WAIT", 2, 5000) == 2

    old, new, seconds = sentinel_group.failover(kill=True)
    topology_timings.append(f"sentinel failover (SIGKILL master, 3 sentinels): {seconds:.2f}s")

    assert not old.running
    assert new is sentinel_group.master and new is not old
    assert client.get("acked") == "yes"  # the pool asked the sentinels for the new master
    client.set("k", "after")
    assert client.connection_pool.get_master_address() == (new.host, new.port)
    client.close()


async def test_forced_failover_is_followed_by_the_async_master_for_client(
    sentinel_group: SentinelGroup, topology_timings: list[str]
) -> None:
    client = sentinel_group.async_master_for(decode_responses=True)
    await client.set("k", "before")
    old, new, seconds = sentinel_group.failover(kill=False)
    topology_timings.append(f"sentinel failover (SENTINEL FAILOVER): {seconds:.2f}s")

    assert old.running and new is not old
    await client.set("k", "after")
    assert await client.get("k") == "after"
    host, port = await client.connection_pool.get_master_address()
    assert (host, port) == (new.host, new.port)
    await client.aclose()
