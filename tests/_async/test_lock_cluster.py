"""The lock tests again, with a ``RedisCluster`` client against the 3 + 3 node cluster fixture.

Every test of the ``test_lock_*.py`` files imported below that takes ``async_client`` runs
here a second time through the Cluster adapter (``_async/cluster.py``): each script on the
master owning its lock's slot, waiters woken by SPUBLISH on a channel in that slot, renewals
split by slot. The tests that inject faults into one private server (``make_server``,
``server``) are skipped here: the cluster's own faults (failover, slot migration) are tested
in ``test_cluster_faults.py``.
"""

from __future__ import annotations

import gc
import time
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async import cluster_renewal
from redlease._async.cluster import AsyncClusterBackend
from redlease._async.runtime import runtime_for
from redlease._core.lease import process_id
from tests._async.helpers import skipped, wait_until
from tests._async.lock_helpers import hold_until, keys, queued
from tests._async.test_lock_arguments import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_basics import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_decorator import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_fencing import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_outages import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_waiting import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_watchdog import *  # noqa: F403 - the tests to run again
from tests.support import AsyncTasks
from tests.topology import RedisClusterServers, key_slot

_SERVER_FAULTS = "injects faults into one private server; cluster faults: test_cluster_faults.py"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_outage_raises_unavailable_not_false = skipped(_SERVER_FAULTS)
test_release_during_outage_raises_and_lets_go = skipped(_SERVER_FAULTS)
test_hung_server_raises_unavailable_and_leaves_no_lock = skipped(_SERVER_FAULTS)
test_a_hung_server_costs_the_timeout_plus_one_socket_timeout = skipped(_SERVER_FAULTS)
test_a_waiter_whose_timeout_ends_in_an_outage_is_told_unavailable_not_false = skipped(
    _SERVER_FAULTS
)
test_server_restarting_empty_is_reported_lost = skipped(_SERVER_FAULTS)
test_a_client_that_decodes_responses_works = skipped("runs on the standalone server only")
test_client_of_the_wrong_kind_is_refused = skipped("does not use a client")
test_bad_ttl = skipped("argument checks: no cluster involved")
test_bad_options = skipped("argument checks: no cluster involved")
test_bad_name = skipped("argument checks: no cluster involved")
test_connections_the_server_closed_while_idle_are_replaced = skipped(
    "kept connections of one server's backend: the cluster's nodes have their own"
)
test_twin_a_killed_connection_reused_unchecked_fails_the_call = skipped(
    "kept connections of one server's backend: the cluster's nodes have their own"
)
test_a_renewal_on_a_killed_connection_goes_again_at_once = skipped(
    "kept connections of one server's backend: the cluster's nodes have their own"
)
test_twin_a_renewal_tried_once_fails_on_a_killed_connection = skipped(
    "kept connections of one server's backend: the cluster's nodes have their own"
)
test_the_watchdog_renews_thousands_of_locks_in_a_few_calls_a_round = skipped(
    "counts calls on one server (cluster renewals: test_one_renewer_serves_a_thousand_locks)"
)
test_twin_renewing_in_calls_of_100_would_take_15_a_round = skipped(
    "counts calls on one server (cluster renewals: test_one_renewer_serves_a_thousand_locks)"
)


_WAITER_COMMANDS = (
    "cmdstat_evalsha",
    "cmdstat_eval",
    "cmdstat_ssubscribe",
    "cmdstat_sunsubscribe",
    "cmdstat_subscribe",
)
"""What a waiter could send (a polling waiter: scripts). Data commands are left out: the nodes
replicate them to each other, and a previous test's late clean-up may still land."""


async def _commands(cluster: RedisClusterServers) -> Counter[str]:
    """Commands a waiter could send, processed by every node (masters and replicas) so far."""
    total: Counter[str] = Counter()
    for srv in cluster.nodes:
        conn = redis.asyncio.Redis(host=srv.host, port=srv.port)
        try:
            stats = await conn.info("commandstats")
        finally:
            await conn.aclose()
        total.update({k: int(v["calls"]) for k, v in stats.items() if k in _WAITER_COMMANDS})
    return total


async def test_a_blocked_waiter_sends_no_commands(  # type: ignore[no-redef]
    async_client: Any, cluster: RedisClusterServers
) -> None:
    """On every node of the cluster: 0 commands/s while a waiter is blocked."""
    gc.collect()  # locks earlier tests dropped in reference cycles: no renewals of theirs

    async def no_watchdog() -> bool:
        return "redlease-renewer" not in AsyncTasks.names()

    await wait_until(no_watchdog, limit=5.0)  # best effort: the count below is the check
    holder = redlease.Lock(async_client, "idle", ttl=10)
    await holder.acquire()
    waiter = redlease.Lock(async_client, "idle")
    counted: list[Counter[str]] = []

    async def wait() -> bool:
        return await waiter.acquire(timeout=2.5)

    async def count() -> None:
        # The waiter is queued and asleep by now (its subscription on a cluster node and its
        # first try take a few round trips: generous on a loaded machine).
        await AsyncTasks.sleep(1.2)
        before = await _commands(cluster)
        await AsyncTasks.sleep(1.0)
        counted.append(await _commands(cluster) - before)

    results = await AsyncTasks.gather(wait, count)
    assert results[0] is False
    assert counted == [Counter()]
    await holder.release()


async def test_one_renewer_serves_a_thousand_locks(  # type: ignore[no-redef]
    async_client: Any,
) -> None:
    """1000 locks in many slots stay held through several renewal ticks."""
    locks = [redlease.Lock(async_client, f"many:{i}", ttl=2.0) for i in range(1000)]
    for lock in locks:
        assert await lock.acquire(blocking=False)
    await AsyncTasks.sleep(2.5)  # longer than the lease: held only if renewed (2 s of slack)
    for lock in locks:
        assert await async_client.pexpire(keys(str(lock.name)).lock, 10_000)  # 0 if gone
    for lock in locks:
        await lock.release()


async def test_waiters_are_woken_on_the_slot_owner_only(
    async_client: Any, cluster: RedisClusterServers
) -> None:
    """A release publishes once, with SPUBLISH, on the node owning the lock's slot."""
    holder = redlease.Lock(async_client, "sharded", ttl=10)
    waiter = redlease.Lock(async_client, "sharded", ttl=10)

    async def wait() -> bool:
        assert await wait_until(holder.locked)
        got = await waiter.acquire(timeout=10)
        await waiter.release()
        return got

    owner = cluster.master_of(keys("sharded").lock)
    before = {srv.port: await _pubsub_stats(srv) for srv in cluster.nodes}
    results = await AsyncTasks.gather(hold_until(holder, queued(async_client, "sharded", 1)), wait)
    assert results[1] is True
    after = {srv.port: await _pubsub_stats(srv) for srv in cluster.nodes}
    spublished = {p: after[p][0] - before[p][0] for p in after}
    published = {p: after[p][1] - before[p][1] for p in after}
    assert spublished[owner.port] >= 1
    assert all(n == 0 for p, n in spublished.items() if p != owner.port)
    assert set(published.values()) == {0}  # nothing broadcast with PUBLISH


async def _pubsub_stats(srv: Any) -> tuple[int, int]:
    """(SPUBLISH calls, PUBLISH calls) on one node, scripts included."""
    conn = redis.asyncio.Redis(host=srv.host, port=srv.port)
    try:
        stats = await conn.info("commandstats")
    finally:
        await conn.aclose()
    return (
        int(stats.get("cmdstat_spublish", {}).get("calls", 0)),
        int(stats.get("cmdstat_publish", {}).get("calls", 0)),
    )


async def test_renewals_take_one_round_trip_per_node_per_tick(
    async_client: Any, cluster: RedisClusterServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 locks in 60 slots on 3 masters: each watchdog tick writes one pipeline per node."""
    ticks: list[tuple[int, int]] = []  # (holdings renewed, pipelines written) per tick
    real_renew, real_send = cluster_renewal.AsyncClusterRenewal.renew, cluster_renewal._Batch.send
    sends: list[int] = []

    async def send(node: Any, script: Any, calls: Any) -> Any:
        sends.append(len(calls))
        return await real_send(node, script, calls)

    async def renew(self: Any, script: Any, due: Any) -> Any:
        before = len(sends)
        result = await real_renew(self, script, due)
        ticks.append((len(due), len(sends) - before))
        return result

    monkeypatch.setattr(cluster_renewal._Batch, "send", staticmethod(send))
    monkeypatch.setattr(cluster_renewal.AsyncClusterRenewal, "renew", renew)
    locks = [redlease.Lock(async_client, f"tick:{i}", ttl=1.5) for i in range(60)]
    for lock in locks:
        assert await lock.acquire(blocking=False)
    slots = {key_slot(keys(f"tick:{i}").lock) for i in range(60)}
    await AsyncTasks.sleep(1.2)  # a couple of ticks
    for lock in locks:
        await lock.release()
    assert ticks, "no renewal happened"
    assert all(pipelines <= len(cluster.masters) for _, pipelines in ticks), ticks
    assert max(renewed for renewed, _ in ticks) >= 30  # many locks per tick, few round trips
    assert len(slots) > len(cluster.masters)  # the locks really were spread over many slots
    assert max(sends) > 1  # one pipeline carries the calls of several slots


async def test_a_stale_map_of_slots_is_followed_by_scripts_and_subscriptions(
    async_client: Any, cluster: RedisClusterServers
) -> None:
    """MOVED, from a script or from SSUBSCRIBE, is followed once to the node it names."""
    name = "stale-map"
    slot = key_slot(keys(name).lock)
    owner = cluster.master_of(slot)
    wrong = next(srv for srv in cluster.masters if srv is not owner)
    backend = runtime_for(async_client).backend
    assert isinstance(backend, AsyncClusterBackend)

    lock = redlease.Lock(async_client, name)
    await lock.inspect()  # the map of slots is known now
    backend._croot._owners[slot] = (wrong.host, wrong.port)  # as if the slot had just moved
    assert await lock.acquire(timeout=0)  # MOVED from `wrong`: run once on the owner
    await lock.release()

    await backend.owner(slot)  # refresh the map, then make it wrong again
    backend._croot._owners[slot] = (wrong.host, wrong.port)
    refused_before = _rejected(wrong, "ssubscribe")
    channel = runtime_for(async_client).channels(keys(name).lock) + b"test"
    subscription = backend.pubsub()
    await subscription.subscribe(channel)
    kinds = []
    for _ in range(20):  # bounded: the confirmation comes from the owner
        message = await subscription.get_message(timeout=0.2)
        if message is not None:
            kinds.append(message["type"])
            if message["type"] == "subscribe":
                break
    assert kinds[-1:] == ["subscribe"]
    assert _rejected(wrong, "ssubscribe") == refused_before + 1  # it did go there first
    with owner.client() as conn:
        assert conn.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1] == 1
    await subscription.aclose()


def _rejected(srv: Any, command: str) -> int:
    """How many ``command`` calls ``srv`` refused (MOVED included)."""
    with srv.client() as conn:
        stats = conn.info("commandstats").get(f"cmdstat_{command}", {})
    return int(stats.get("rejected_calls", 0))


async def test_a_cluster_client_that_decodes_responses_works(
    cluster: RedisClusterServers,
) -> None:
    """decode_responses=True on the cluster client: replies and sharded messages are str."""
    client = cluster.async_client(decode_responses=True)
    seen: list[int] = []

    def worker() -> Any:
        async def run() -> None:
            lock = redlease.Lock(client, "decoded", ttl=5.0)
            for _ in range(10):
                async with lock:
                    seen.append(lock.fence or 0)

        return run

    await AsyncTasks.gather(*(worker() for _ in range(3)))  # contended: wake-ups too
    assert sorted(seen) == seen and len(set(seen)) == 30
    await client.aclose()


async def test_a_waiter_follows_its_lock_to_the_slots_new_master(
    async_client: Any, cluster: RedisClusterServers
) -> None:
    """The slot moves while the lock is held and waited on: the node drops the waiter's
    subscription (sunsubscribe), the waiter subscribes on the new master and is woken there."""
    name = "moving"
    source = cluster.master_of(keys(name).lock)
    target = next(srv for srv in cluster.masters if srv is not source)
    channel = runtime_for(async_client).channels(keys(name).lock) + process_id()
    holder = redlease.Lock(async_client, name, ttl=1.5)
    waiter = redlease.Lock(async_client, name, ttl=10)
    woken: list[float] = []

    def listening(node: Any) -> Any:
        async def check() -> bool:
            with node.client() as conn:
                return int(conn.execute_command("PUBSUB", "SHARDNUMSUB", channel)[1]) == 1

        return check

    async def hold() -> None:
        assert await holder.acquire()
        assert await wait_until(listening(source))
        await AsyncTasks.blocking(lambda: cluster.migrate_slot(keys(name).lock, target))
        assert await wait_until(listening(target))
        await AsyncTasks.sleep(1.6)  # past the lease: renewals go to the target
        assert await holder.owned()
        woken.append(time.monotonic())
        await holder.release()

    async def wait() -> None:
        assert await wait_until(holder.locked)
        assert await waiter.acquire(timeout=30)
        woken.append(time.monotonic())
        await waiter.release()

    await AsyncTasks.gather(hold, wait)
    assert woken[1] - woken[0] < 5.0  # woken by SPUBLISH on the target (its lease: 10 s)


async def test_close_ends_the_per_lock_hubs_and_node_connections(
    async_client: Any, cluster: RedisClusterServers
) -> None:
    """redlease.close() on a cluster client: no background work left, no connection of ours
    on any node (its per-lock hubs included), and a wait in progress fails Unavailable."""
    before = AsyncTasks.background()
    holder = redlease.Lock(async_client, "closing", ttl=10)
    waiter = redlease.Lock(async_client, "closing")
    assert await holder.acquire()

    async def wait() -> None:
        with pytest.raises(redlease.LockUnavailable, match=r"redlease\.close"):
            await waiter.acquire(timeout=20)

    async def close_when_queued() -> None:
        assert await wait_until(queued(async_client, "closing", 1))
        assert await wait_until(_listening(cluster, keys("closing").lock, async_client))
        await redlease.close(async_client)

    await AsyncTasks.gather(wait, close_when_queued)
    assert AsyncTasks.background() - before == set()
    owner = cluster.master_of(keys("closing").lock)
    with owner.client() as conn:
        assert int(conn.execute_command("PUBSUB", "SHARDNUMSUB", _channel(async_client))[1]) == 0
    again = redlease.Lock(async_client, "closing")  # the client's next use starts afresh
    assert not await again.acquire(timeout=0)  # (still held: close() releases nothing)
    await redlease.close(async_client)


def _channel(client: Any) -> bytes:
    return b"redlease:waiters:{closing}:" + process_id()


def _listening(cluster: RedisClusterServers, key: bytes, client: Any) -> Any:
    async def check() -> bool:
        with cluster.master_of(key).client() as conn:
            return int(conn.execute_command("PUBSUB", "SHARDNUMSUB", _channel(client))[1]) == 1

    return check
