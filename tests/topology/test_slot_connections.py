"""How to reach the connection of the node that owns a slot, sync and asyncio, and why it
matters: ``WAIT`` counts the writes of the connection it is sent on (groundwork, issue 9)."""

from __future__ import annotations

import redis
import redis.asyncio.cluster
import redis.cluster

from tests.topology import RedisClusterServers

KEY = "{lock}:wait"


def test_wait_on_the_slot_owners_connection_counts_the_write(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    node = cluster_client.get_node_from_key(KEY)
    node_client = cluster_client.get_redis_connection(node)  # a redis.Redis for that node
    pipe = node_client.pipeline(transaction=False)  # one connection for both commands
    pipe.set(KEY, "token")
    pipe.execute_command("WAIT", 1, 5000)
    assert pipe.execute() == [True, 1]


def test_twin_wait_on_another_connection_says_nothing_about_the_write(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    """With the replica frozen, only the writing connection's WAIT sees 0 acknowledgements;
    a WAIT on another connection answers 1 at once: it vouches for nothing of our write."""
    master = cluster.master_of(KEY)
    (replica,) = cluster.replicas_of(master)
    writer, other = master.client(), master.client()
    # ``other`` runs its last command before the writes: redis < 7.2 sets a connection's
    # WAIT offset to the master's offset after *every* command (7.2+, valkey: after its own
    # writes only), so on 7.0 a command after the write would make it wait for the write.
    assert other.ping()
    writer.set(KEY, "before")
    assert writer.execute_command("WAIT", 1, 5000) == 1  # the replica has everything so far
    replica.pause()
    try:
        writer.set(KEY, "token")
        assert other.execute_command("WAIT", 1, 100) == 1  # meaningless for our write
        assert writer.execute_command("WAIT", 1, 100) == 0  # the truth: not replicated
    finally:
        replica.resume()
        writer.close()
        other.close()


async def test_async_raw_connection_to_the_slot_owner_runs_write_and_wait(
    cluster: RedisClusterServers,
    async_cluster_client: redis.asyncio.cluster.RedisCluster,
) -> None:
    await async_cluster_client.initialize()  # fills the slot map (else SlotNotCoveredError)
    node = async_cluster_client.get_node_from_key(KEY)
    assert (node.host, node.port) == (cluster.master_of(KEY).host, cluster.master_of(KEY).port)
    conn = node.acquire_connection()  # redis-py 8: node.release(); 5.0: no release() at all
    try:
        await conn.send_command("SET", KEY, "token")
        assert await conn.read_response() == b"OK"
        await conn.send_command("WAIT", 1, 5000)
        assert await conn.read_response() == 1
    finally:
        node.release(conn)
