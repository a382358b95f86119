"""The Redis Cluster adapter: the server interface (``server.py``) over a ``RedisCluster``.

Every redlease script touches the keys of one primitive, all in one slot (the ``{name}`` hash
tag, see :mod:`redlease._core.keys`). :class:`AsyncClusterBackend` runs each script on the
master that owns that slot, through a private connection pool per node built from the node's
settings with client-side retries off, exactly as the standalone adapter does for one server:
no hidden retries, every reply within the caller's deadline.

What a cluster adds:

* **Redirections.** A node answers ``MOVED`` when it does not own the slot (a failover, a slot
  moved, or our map of slots is stale) and ``ASK`` while the slot is being migrated away and
  the keys are already on the importing node. Either reply means the script did *not* run: the
  node refused it before touching anything. Running it once on the node the reply names is
  therefore not a hidden retry (nothing is run twice); a second redirection in a row is raised.
  ``MOVED`` also marks the map of slots stale, refreshed before the next script.
* **Wake-ups that follow the shard.** ``sharded`` is True: the lock scripts tell waiters with
  ``SPUBLISH`` on a channel in the lock's own slot (``redlease:waiters:{<name>}:<process id>``),
  and :meth:`AsyncClusterBackend.pubsub` subscribes with ``SSUBSCRIBE`` on the node owning
  that slot (``cluster_pubsub.py``). Nothing is broadcast to every node.
* **Redis >= 7.0.** Each master is asked its version (``INFO server``) once, before its first
  script: an older one is refused with :class:`ClusterTooOld` naming the requirement, instead
  of scripts failing on ``SPUBLISH`` and waiters on ``SSUBSCRIBE``.
* **Renewals by node.** :meth:`AsyncClusterBackend.renewal` splits a watchdog batch by slot
  and pipelines each node's calls on one connection (``cluster_renewal.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ConnectionError,
    MovedError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TimeoutError,
)

from .._core.cluster import check_one_slot, sharded_pubsub_refusal
from .._core.scripts import Script
from .._redispy_versions import AsyncConnections
from .._synchronization import ProcessLock
from .cluster_pubsub import ShardedSubscriptions, new_subscription
from .cluster_renewal import AsyncClusterRenewal
from .flavor import Flavor, cluster_flavor, redis_flavor, translate
from .one_server import AsyncBackend
from .server import Pending

__all__ = ["AsyncClusterBackend", "AsyncClusterRenewal", "ClusterTooOld", "cluster_backend"]

_guard = ProcessLock()

_DROPPED = (
    "redis_connect_func",
    "valkey_connect_func",
    "retry",
    "connection_class",
    "max_connections",
)
"""Node connection settings that belong to the cluster client, not to a private pool."""


def _node_settings(node: Any) -> tuple[Any, dict[str, Any]]:
    """``(connection class, connection kwargs)`` of a ``ClusterNode`` (sync or asyncio).

    The sync node keeps them in its ``redis_connection``'s pool (valkey-py's:
    ``valkey_connection``), the asyncio node on itself.
    """
    client = getattr(node, "redis_connection", None) or getattr(node, "valkey_connection", None)
    if client is not None:
        pool = client.connection_pool
        cls, kwargs = pool.connection_class, dict(pool.connection_kwargs)
    else:
        cls, kwargs = node.connection_class, dict(node.connection_kwargs)
    for name in _DROPPED:
        kwargs.pop(name, None)
    return cls, kwargs


class ClusterTooOld(ResponseError):
    """A master of the cluster predates sharded pub/sub (Redis < 7.0): redlease cannot wake
    waiters there. Raised before any script is sent to it; the primitives chain it into
    their ``*Unavailable`` error, whose message names the node, its version and 7.0."""


def _cluster_exceptions(flavor: Flavor) -> tuple[type[BaseException], ...]:
    """The client library's exception for "no map of slots" (valkey-py's own class)."""
    if flavor.library != "valkey":
        return ()
    import valkey.exceptions  # type: ignore[import-not-found, unused-ignore]

    cls: type[BaseException] = valkey.exceptions.ValkeyClusterException
    return (cls,)


@dataclass
class ClusterPending(Pending):
    """A script sent to the node owning its slot (``node``), reply not read yet."""

    node: Any = None
    slot: int = 0


def cluster_backend(client: Any) -> AsyncClusterBackend | None:
    """A new backend for ``client`` if it is a cluster client, else None."""
    flavor = cluster_flavor(client)
    return None if flavor is None else AsyncClusterBackend(client, flavor=flavor)


class AsyncClusterBackend:
    """A Redis Cluster reached through a redis-py ``RedisCluster`` client.

    It implements the server interface (``server.AsyncServer``): each script runs on the
    master owning its keys' slot, through one standalone :class:`AsyncBackend` per node.
    """

    sharded = True

    def __init__(
        self,
        client: Any,
        timeout: float | None = None,
        root: AsyncClusterBackend | None = None,
        *,
        flavor: Flavor | None = None,
    ) -> None:
        self.client = client
        self.identity: tuple[str, int] | None = None
        self._croot = root or self
        self._flavor: Flavor = flavor or (root._flavor if root is not None else redis_flavor())
        self._foreign = self._flavor.errors  # valkey-py's own errors: translated
        # what the client library raises when no node gives it a map of slots (not a
        # RedisError: said as one)
        self._unmapped: tuple[type[BaseException], ...] = (
            RedisClusterException,
            *_cluster_exceptions(self._flavor),
        )
        self.closed = False  # set by redlease.close(): every new call raises ConnectionError
        self._timeout = timeout
        self._nodes: dict[tuple[str, int], AsyncBackend] = {}  # root only: per node
        self._template: tuple[Any, dict[str, Any]] | None = None  # root only
        # root only: slot -> its master, as last looked up or learned from MOVED; cleared when
        # the map is refreshed (after MOVED, or a node that did not answer)
        self._owners: dict[int, tuple[str, int]] = {}
        self._stale = False  # root only: refresh the map of slots before the next script
        # root only: master -> None (it has sharded pub/sub) or why it cannot serve redlease,
        # from its INFO server, asked once before its first script
        self._versions: dict[tuple[str, int], str | None] = {}
        # root only: per master, the one SSUBSCRIBE connection of the waited locks there
        self._subscriptions = ShardedSubscriptions()
        self._cluster_deadlines: dict[float, AsyncClusterBackend] = {}

    @property
    def subscriptions(self) -> ShardedSubscriptions:
        """Per master, the one SSUBSCRIBE connection of the locks waited on there."""
        return self._croot._subscriptions

    def renewal(self) -> AsyncClusterRenewal:
        """How the watchdog renews holdings here: split by slot, pipelined per node."""
        return AsyncClusterRenewal(self)

    def _refuse_if_closed(self) -> None:
        if self._croot.closed:
            raise ConnectionError("redlease was closed for this client (redlease.close())")

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """The cluster client library's errors as redis-py's (the nodes log outages)."""
        try:
            yield
        except self._foreign as exc:  # () for redis-py: nothing to translate
            raise translate(exc) from exc

    def __repr__(self) -> str:
        return f"<{type(self).__name__} redis cluster nodes={sorted(self._croot._nodes)}>"

    @property
    def socket_timeout(self) -> float | None:
        """The longest a reply may take here (``None``: no limit)."""
        if self._timeout is not None:
            return self._timeout
        value = self.client.nodes_manager.connection_kwargs.get("socket_timeout")
        if value is None and self._croot._template is not None:
            value = self._croot._template[1].get("socket_timeout")
        return None if value is None else float(value)

    def with_deadline(self, timeout: float) -> AsyncClusterBackend:
        """This cluster, with every reply (and connect) bounded by ``timeout`` seconds."""
        backend = self._croot._cluster_deadlines.get(timeout)
        if backend is None:
            backend = AsyncClusterBackend(self.client, timeout, root=self._croot)
            self._croot._cluster_deadlines[timeout] = backend
        return backend

    # -- routing ----------------------------------------------------------------------------
    @property
    def address(self) -> str:
        """Which cluster this is, for log messages."""
        return f"cluster {','.join(f'{h}:{p}' for h, p in sorted(self._croot._nodes))}"

    async def owner(self, slot: int) -> AsyncBackend:
        """The backend of the master that owns ``slot`` (as far as we know)."""
        self._refuse_if_closed()
        root = self._croot
        address = root._owners.get(slot) if not root._stale else None
        if address is None:
            try:
                with self._translated():
                    address = root._owners[slot] = await self._lookup(slot)
            except self._unmapped as exc:  # not a RedisError: say it as one
                root._stale = True
                raise ConnectionError(
                    f"no node of the cluster answered for slot {slot}: {exc}"
                ) from exc
        node = self._node(address)
        if address not in root._versions:
            await self._check_version(address, node)
        refusal = root._versions[address]
        if refusal is not None:
            raise ClusterTooOld(refusal)
        return node

    async def _check_version(self, address: tuple[str, int], node: AsyncBackend) -> None:
        """Ask the master at ``address`` (once) whether it has sharded pub/sub (Redis >= 7.0):
        without it, scripts would fail on SPUBLISH and waiters on SSUBSCRIBE."""
        try:
            conn = await node.checkout()
        except self._unmapped as exc:
            raise ConnectionError(f"node {address[0]}:{address[1]}: {exc}") from exc
        try:
            with node.translated():
                await AsyncConnections.send(conn, "INFO", "server")
            info = await node.read(conn, time.monotonic(), self.socket_timeout)
        except BaseException:
            await node.discard(conn)
            raise
        await node.release(conn)
        self._croot._versions[address] = sharded_pubsub_refusal(info, f"{address[0]}:{address[1]}")

    async def _lookup(self, slot: int) -> tuple[str, int]:
        """The master of ``slot`` in the client's map of slots (refreshed first if stale)."""
        root = self._croot
        if getattr(self.client, "_initialize", False):  # an asyncio client not used yet
            await self.client.initialize()
        manager = self.client.nodes_manager
        if root._stale or not manager.slots_cache:
            root._stale = False
            root._owners.clear()
            await manager.initialize()
        node = manager.get_node_from_slot(slot)
        if root._template is None:
            root._template = _node_settings(node)
        return (node.host, int(node.port))

    def _node(self, address: tuple[str, int]) -> AsyncBackend:
        root = self._croot
        backend = root._nodes.get(address)
        if backend is None:
            with _guard:  # threads of one sync client: one pool per node, none leaked
                backend = root._nodes.get(address)
                if backend is None:
                    backend = self._new_node(address)
                    root._nodes[address] = backend
        return backend if self._timeout is None else backend.with_deadline(self._timeout)

    def _new_node(self, address: tuple[str, int]) -> AsyncBackend:
        root = self._croot
        if root._template is None:
            root._template = _node_settings(self.client.nodes_manager.get_node_from_slot(0))
        cls, kwargs = root._template
        kwargs = {**kwargs, "host": address[0], "port": address[1]}
        pool = self._flavor.pool_class(connection_class=cls, **kwargs)
        return AsyncBackend(self._flavor.client_class(connection_pool=pool), self._flavor)

    def mark_stale(self) -> None:
        """A node failed to answer: refresh the map of slots before the next script (the
        slot may have a new owner after a failover)."""
        self._croot._stale = True

    def redirected(self, slot: int, exc: AskError) -> AsyncBackend:
        """The node a MOVED or ASK reply for ``slot`` names (MOVED: its new owner)."""
        target = (exc.host, int(exc.port))
        if isinstance(exc, MovedError):
            self._croot._owners[slot] = target
        return self._node(target)

    # -- scripts ----------------------------------------------------------------------------
    async def run(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        timeout: float | None = None,
    ) -> Any:
        """EVALSHA ``script`` once on the master owning the slot of ``keys``; its reply.

        Follows one MOVED or ASK (the script did not run, see the module docstring).
        """
        check_one_slot(keys)
        slot = key_slot(keys[0])
        try:
            node = await self.owner(slot)
            return await node.run(script, keys, args, timeout)
        except AskError as exc:
            return await self._redirected(slot, exc, script, keys, args, timeout)
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise

    async def run_acknowledged(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        wait: Sequence[Any],
        wait_timeout: float,
    ) -> tuple[Any, Any]:
        """Script, then WAIT/WAITAOF, on one connection to the slot's master (follows one
        MOVED; an ASK mid-migration is raised: the wait would go to another connection)."""
        check_one_slot(keys)
        slot = key_slot(keys[0])
        try:
            node = await self.owner(slot)
            try:
                return await node.run_acknowledged(script, keys, args, wait, wait_timeout)
            except MovedError as exc:  # did not run (see _redirected): once on the new owner
                target = self.redirected(slot, exc)
                self.mark_stale()
                return await target.run_acknowledged(script, keys, args, wait, wait_timeout)
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise

    async def _redirected(
        self,
        slot: int,
        exc: AskError,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        timeout: float | None,
    ) -> Any:
        # MOVED/ASK: the node refused the script before running any of it, so sending it once
        # to the node named is not a hidden retry. A second redirection is raised as is.
        target = self.redirected(slot, exc)
        try:
            if isinstance(exc, MovedError):
                self.mark_stale()  # learn the new map before the next script
                return await target.run(script, keys, args, timeout)
            return await _asking(target, script, keys, args, timeout)
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise

    async def send(
        self, script: Script, keys: Sequence[bytes], args: Sequence[Any], packed: Any = None
    ) -> Pending:
        """Send EVALSHA ``script`` to the master owning the slot of ``keys``."""
        check_one_slot(keys)
        slot = key_slot(keys[0])
        try:
            node = await self.owner(slot)
            pending = await node.send(script, keys, args, packed)
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise
        return ClusterPending(
            pending.conn, script, keys, args, pending.sent_at, node=node, slot=slot
        )

    async def behind(
        self,
        earlier: Pending,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any = None,
    ) -> Pending:
        """Send ``script`` behind ``earlier`` on its node and connection (same slot)."""
        assert isinstance(earlier, ClusterPending)
        try:
            pending = await earlier.node.behind(earlier, script, keys, args, packed)
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise
        return ClusterPending(
            pending.conn,
            script,
            keys,
            args,
            pending.sent_at,
            before=pending.before,
            evaled=pending.evaled,
            node=earlier.node,
            slot=earlier.slot,
        )

    async def receive(self, pending: Pending, timeout: float | None) -> Any:
        """The reply to ``pending`` (following one MOVED or ASK, as :meth:`run` does)."""
        assert isinstance(pending, ClusterPending)
        try:
            return await pending.node.receive(pending, timeout)
        except AskError as exc:
            left = None if timeout is None else pending.sent_at + timeout - time.monotonic()
            left = None if left is None else max(left, 0.001)
            return await self._redirected(
                pending.slot, exc, pending.script, pending.keys, pending.args, left
            )
        except (ConnectionError, TimeoutError):
            self.mark_stale()
            raise

    async def abandon(self, pending: Pending) -> None:
        """Close the connection of a script whose reply will not be read."""
        assert isinstance(pending, ClusterPending)
        await pending.node.abandon(pending)

    # -- pub/sub and identity ---------------------------------------------------------------
    def pubsub(self) -> Any:
        """A sharded subscription (SSUBSCRIBE) on the node owning its channel's slot."""
        self._refuse_if_closed()
        return new_subscription(self)

    async def identify(self) -> tuple[str, int]:
        """``("cluster:<node id>", 0)``: the id of the node owning slot 0 when first asked."""
        root = self._croot
        if root.identity is not None:
            return root.identity
        node = await self.owner(0)
        conn = await node.checkout()
        try:
            with node.translated():
                await AsyncConnections.send(conn, "CLUSTER", "MYID")
            reply = await node.read(conn, time.monotonic(), self.socket_timeout)
        except BaseException:
            await node.discard(conn)
            raise
        await node.release(conn)
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        root.identity = (f"cluster:{text}", 0)
        return root.identity

    async def aclose(self) -> None:
        """Refuse new calls and close the private connections of every node (the user's
        client is left alone)."""
        self._croot.closed = True
        await self._croot._subscriptions.aclose(1.0)
        for backend in list(self._croot._nodes.values()):
            await backend.aclose()


async def _asking(
    node: AsyncBackend,
    script: Script,
    keys: Sequence[bytes],
    args: Sequence[Any],
    timeout: float | None,
) -> Any:
    """Run ``script`` once on the node importing its slot: ASKING, then EVAL, one connection.

    EVAL (the source) rather than EVALSHA: the importing node may not have the script cached,
    and a NOSCRIPT there would need a second ASKING.
    """
    limit = node.socket_timeout
    if timeout is not None and limit is not None:
        timeout = min(timeout, limit)
    conn = await node.checkout()
    try:
        with node.translated():
            await conn.send_packed_command(
                conn.pack_commands([("ASKING",), ("EVAL", script.source, len(keys), *keys, *args)])
            )
        sent = time.monotonic()
        await node.read(conn, sent, timeout)  # +OK
        reply = await node.read(conn, sent, timeout)
    except RedisError as exc:
        if isinstance(exc, (ConnectionError, TimeoutError)):
            await node.discard(conn)
        else:
            await node.release(conn)
        raise
    except BaseException:
        await node.discard(conn)
        raise
    await node.release(conn)
    return reply
