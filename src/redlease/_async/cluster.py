"""The Redis Cluster adapter: the client interface of ``client.py`` over a ``RedisCluster``.

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
  that slot, on the one private connection the client keeps to that node for the channels of
  every lock it waits on there (:class:`_NodeSubscriptions`), not one connection per waited
  lock. Nothing is broadcast to every node. When the slot
  moves (the node says ``sunsubscribe``) or the node dies, the subscription reports a broken
  connection: the waiter hub wakes every waiter to try again and subscribes anew, on the new
  owner. redis-py's own cluster pub/sub is not used: it borrows the nodes' pools (which retry)
  and its asyncio form arrived only in redis-py 8.
* **Redis >= 7.0.** Each master is asked its version (``INFO server``) once, before its first
  script: an older one is refused with :class:`ClusterTooOld` naming the requirement, instead
  of scripts failing on ``SPUBLISH`` and waiters on ``SSUBSCRIBE``.
* **Renewals by node.** :class:`AsyncClusterRenewal` splits a watchdog batch by slot (a
  renewal script may touch one slot only) and sends each node's calls together, pipelined on
  one connection: one round trip per node per tick, whatever the number of locks.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ConnectionError,
    MovedError,
    NoScriptError,
    RedisClusterException,
    RedisError,
    ResponseError,
    TimeoutError,
)

from .._core import renewals
from .._core.cluster import check_one_slot, sharded_pubsub_refusal
from .._core.health import Health
from .._core.kept import forget_frames, kept
from .._core.lease import Holding
from .._core.scripts import Script
from .._synchronization import AsyncBackground, AsyncEvent, AsyncMutex, ProcessLock
from .client import AsyncBackend, Pending, _Flavor, _redis_flavor, connecting_by, translate
from .hub import TICK
from .renewer import MIN_WAIT

__all__ = ["AsyncClusterBackend", "AsyncClusterRenewal", "ClusterTooOld"]

_guard = ProcessLock()
_E = TypeVar("_E", bound=BaseException)

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


def _cluster_exceptions(flavor: _Flavor) -> tuple[type[BaseException], ...]:
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


class AsyncClusterBackend(AsyncBackend):
    """A Redis Cluster reached through a redis-py ``RedisCluster`` client.

    It has the methods of :class:`AsyncBackend` (a subclass only so that it goes wherever a
    backend goes; it shares none of the standalone state): each script runs on the master
    owning its keys' slot, through one standalone backend per node.
    """

    sharded = True

    def __init__(
        self,
        client: Any,
        timeout: float | None = None,
        root: AsyncClusterBackend | None = None,
        *,
        flavor: _Flavor | None = None,
    ) -> None:
        self.client = client
        self.identity: tuple[str, int] | None = None
        self._croot = root or self
        self._root = self._croot  # what the inherited _refuse_if_closed() looks at
        self._flavor = flavor or (root._flavor if root is not None else _redis_flavor())
        self._foreign = self._flavor.errors  # valkey-py's own errors: translated
        # what the client library raises when no node gives it a map of slots (not a
        # RedisError: said as one)
        self._unmapped: tuple[type[BaseException], ...] = (
            RedisClusterException,
            *_cluster_exceptions(self._flavor),
        )
        self.closed = False  # set by redlease.close(): every new call raises ConnectionError
        self._health = Health() if root is None else root._health  # for the outage log
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
        self._subscriptions: dict[AsyncBackend, _NodeSubscriptions] = {}
        self._cluster_deadlines: dict[float, AsyncClusterBackend] = {}

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
            with node._translated():
                conn = await node._checkout()
        except self._unmapped as exc:
            raise ConnectionError(f"node {address[0]}:{address[1]}: {exc}") from exc
        try:
            with node._translated():
                await conn.send_command("INFO", "server")
            info = await node._read(conn, time.monotonic(), self.socket_timeout)
        except BaseException:
            await node._discard(conn)
            raise
        await node._pool.release(conn)
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

    def _broken(self) -> None:
        """A node failed to answer: refresh the map of slots before the next script (the
        slot may have a new owner after a failover)."""
        self._croot._stale = True

    def _moved(self, slot: int, exc: AskError) -> AsyncBackend:
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
            self._broken()
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
                target = self._moved(slot, exc)
                self._broken()
                return await target.run_acknowledged(script, keys, args, wait, wait_timeout)
        except (ConnectionError, TimeoutError):
            self._broken()
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
        target = self._moved(slot, exc)
        try:
            if isinstance(exc, MovedError):
                self._broken()  # learn the new map before the next script
                return await target.run(script, keys, args, timeout)
            return await _asking(target, script, keys, args, timeout)
        except (ConnectionError, TimeoutError):
            self._broken()
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
            self._broken()
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
            self._broken()
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
            self._broken()
            raise

    async def abandon(self, pending: Pending) -> None:
        """Close the connection of a script whose reply will not be read."""
        assert isinstance(pending, ClusterPending)
        await pending.node.abandon(pending)

    # -- pub/sub and identity ---------------------------------------------------------------
    def pubsub(self) -> Any:
        """A sharded subscription (SSUBSCRIBE) on the node owning its channel's slot."""
        self._refuse_if_closed()
        return _ShardedSubscription(self)

    async def identify(self) -> tuple[str, int]:
        """``("cluster:<node id>", 0)``: the id of the node owning slot 0 when first asked."""
        root = self._croot
        if root.identity is not None:
            return root.identity
        node = await self.owner(0)
        with node._translated():
            conn = await node._checkout()
        try:
            with node._translated():
                await conn.send_command("CLUSTER", "MYID")
            reply = await node._read(conn, time.monotonic(), self.socket_timeout)
        except BaseException:
            await node._discard(conn)
            raise
        await node._pool.release(conn)
        text = reply.decode() if isinstance(reply, bytes) else str(reply)
        root.identity = (f"cluster:{text}", 0)
        return root.identity

    async def aclose(self) -> None:
        """Refuse new calls and close the private connections of every node (the user's
        client is left alone)."""
        self._croot.closed = True
        with _guard:
            shared = list(self._croot._subscriptions.values())
        for subscriptions in shared:
            await subscriptions.aclose(1.0)
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
    with node._translated():
        conn = await node._checkout()
    try:
        with node._translated():
            await conn.send_packed_command(
                conn.pack_commands([("ASKING",), ("EVAL", script.source, len(keys), *keys, *args)])
            )
        sent = time.monotonic()
        await node._read(conn, sent, timeout)  # +OK
        reply = await node._read(conn, sent, timeout)
    except RedisError as exc:
        if isinstance(exc, (ConnectionError, TimeoutError)):
            await node._discard(conn)
        else:
            await node._pool.release(conn)
        raise
    except BaseException:
        await node._discard(conn)
        raise
    await node._pool.release(conn)
    return reply


class _ShardedSubscription:
    """The waiter hub's subscription on a cluster: its sharded channel, carried by the one
    SSUBSCRIBE connection this client keeps to the master owning the channel's slot
    (:class:`_NodeSubscriptions`), shared with every other lock waited on there.

    It speaks the hub's language: ``smessage`` and ``ssubscribe`` come out as ``message`` and
    ``subscribe``. A ``sunsubscribe`` the node sends by itself (the slot moved away) raises
    ``ConnectionError``, as a broken connection does: the hub then wakes every waiter to try
    again and subscribes anew, on the slot's new owner. A ``MOVED`` answer to the SSUBSCRIBE
    (our map of slots was stale) is followed once.
    """

    def __init__(self, backend: AsyncClusterBackend) -> None:
        self._backend = backend
        self._channel = b""
        self._node: Any = None
        self._inbox: deque[Any] = deque()  # messages and errors the node's reader hands over
        self._event = AsyncEvent()
        self._followed = False
        self._closed = False

    async def subscribe(self, *channels: bytes) -> None:
        (self._channel,) = channels  # a hub listens on one channel
        try:
            await self._subscribe_on(await self._backend.owner(key_slot(self._channel)))
        except (ConnectionError, TimeoutError):
            self._backend._broken()
            raise

    async def _subscribe_on(self, node: AsyncBackend) -> None:
        self._node = node
        root = self._backend._croot
        while True:
            with _guard:
                shared = root._subscriptions.get(node)
                if shared is None or shared.closed:
                    shared = root._subscriptions[node] = _NodeSubscriptions(root, node)
            if await shared.add(self):
                return
            # it closed meanwhile (its last channel had just left): a fresh one

    def deliver(self, item: Any) -> None:
        """A message for this channel, or the error that ends it (called by the reader)."""
        self._inbox.append(item)
        self._event.set()

    async def get_message(self, timeout: float) -> Any:
        if self._node is None:
            raise ConnectionError("not subscribed")
        if not self._inbox:
            await self._event.wait(timeout)
        self._event.clear()
        if not self._inbox:
            return None
        item = self._inbox.popleft()
        if self._inbox:
            self._event.set()
        if isinstance(item, MovedError):  # our map of slots was stale when we subscribed
            self._backend._broken()
            if self._followed or self._closed:
                raise ConnectionError(f"the waiters' channel moved: {item}") from item
            # A refused SSUBSCRIBE subscribed nothing: subscribing on the node named, once,
            # repeats nothing (and the hub still waits for the confirmation from there).
            self._followed = True
            await self._subscribe_on(self._backend._moved(key_slot(self._channel), item))
            return None
        if isinstance(item, BaseException):
            if isinstance(item, (ConnectionError, TimeoutError)):
                self._backend._broken()
            raise item
        return item

    async def aclose(self) -> None:
        if self._node is not None and not self._closed:
            self._closed = True
            root = self._backend._croot
            with _guard:
                shared = root._subscriptions.get(self._node)
            if shared is not None:
                await shared.remove(self)


class _NodeSubscriptions:
    """One SSUBSCRIBE connection to one master, carrying the sharded channels of every lock
    this client waits on whose slot that master owns (not one connection per waited lock).

    A reader (a task, or a thread) reads it and hands each message to the subscription of its
    channel; it ends, closing the connection, when the last channel has left. A broken
    connection ends every subscription on it (their hubs subscribe again); a refused
    SSUBSCRIBE (``MOVED``, ``NOPERM``) ends only the subscription it was for: replies come in
    the order the commands were sent.
    """

    def __init__(self, root: AsyncClusterBackend, node: AsyncBackend) -> None:
        self._root = root
        self._node = node
        self._pubsub: Any = node.pubsub()._pubsub
        self._guard = threading.Lock()
        self._send = AsyncMutex()  # one command at a time on the shared connection
        self._subs: dict[bytes, _ShardedSubscription] = {}
        self._pending: list[bytes] = []  # SSUBSCRIBEs sent, not yet answered, in order
        self._leaving: set[bytes] = set()  # SUNSUBSCRIBEs sent, not yet answered
        self._started = False
        self._reader: AsyncBackground | None = None
        self.closed = False

    async def add(self, sub: _ShardedSubscription) -> bool:
        """SSUBSCRIBE ``sub``'s channel here; False if this connection has closed already."""
        channel = sub._channel
        with self._guard:
            if self.closed:
                return False
            self._subs[channel] = sub
            self._pending.append(channel)
            first, self._started = not self._started, True
        try:
            await self._command("SSUBSCRIBE", channel)
        except RedisError as exc:
            self._end(exc)
            raise
        if first:  # after the first SSUBSCRIBE: a pub/sub with no subscription cannot read
            self._reader = AsyncBackground(self._read, name="redlease-shards")
        return True

    async def remove(self, sub: _ShardedSubscription) -> None:
        """SUNSUBSCRIBE ``sub``'s channel (best effort: the connection may be gone)."""
        channel = sub._channel
        with self._guard:
            if self._subs.get(channel) is not sub or self.closed:
                return
            del self._subs[channel]
            self._leaving.add(channel)
        with contextlib.suppress(RedisError, OSError):
            await self._command("SUNSUBSCRIBE", channel)

    async def _command(self, name: str, channel: bytes) -> None:
        pubsub = self._pubsub
        await self._send.acquire(None)
        try:
            with self._node._translated():
                method = getattr(pubsub, name.lower(), None)
                if method is not None:
                    await method(channel)
                else:  # valkey-py's asyncio PubSub has neither: its replies parse alike
                    await pubsub.execute_command(name, channel)
        finally:
            self._send.release()

    async def _read(self) -> None:
        pubsub = self._pubsub
        while True:
            with self._guard:
                if not self._subs and not self._pending:
                    self.closed = True  # no add() from now on: a new connection instead
            if self.closed:
                await self._close()
                return
            try:
                try:
                    message = await pubsub.get_message(timeout=TICK)
                except self._node._foreign as exc:  # valkey-py: redis-py's classes
                    raise translate(exc) from exc
            except (AskError, ResponseError) as exc:  # a refused SSUBSCRIBE: the oldest one
                with self._guard:
                    channel = self._pending.pop(0) if self._pending else None
                    sub = None if channel is None else self._subs.pop(channel, None)
                if sub is None:
                    self._end(exc)
                    await self._close()
                    return
                refusal = exc if isinstance(exc, MovedError) else _refused(exc)
                sub.deliver(kept(refusal, ConnectionError))
                continue
            except Exception as exc:  # broken, or closed under us
                self._end(exc)
                await self._close()
                return
            if message is not None:
                self._dispatch(message)

    def _dispatch(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        kind = kind.decode() if isinstance(kind, bytes) else kind
        channel = message["channel"]
        channel = channel.encode() if isinstance(channel, str) else channel
        with self._guard:
            if kind == "ssubscribe":
                if channel in self._pending:
                    self._pending.remove(channel)
                sub = self._subs.get(channel)
                item: Any = {**message, "type": "subscribe"}
            elif kind == "smessage":
                sub = self._subs.get(channel)
                item = {**message, "type": "message"}
            elif kind == "sunsubscribe":
                if channel in self._leaving:  # ours
                    self._leaving.discard(channel)
                    return
                sub = self._subs.pop(channel, None)  # the node gave the slot away
                item = ConnectionError("the waiters' channel was unsubscribed by the server")
            else:
                return
        if sub is not None:
            sub.deliver(item)

    def _end(self, exc: BaseException) -> None:
        """The connection failed: every subscription on it ends with ``exc`` (each with a copy
        of its own, with no frames: it waits in the inbox until its hub reads it, and is
        raised there)."""
        with self._guard:
            self.closed = True
            subs, self._subs = list(self._subs.values()), {}
            self._pending.clear()
        for sub in subs:
            sub.deliver(kept(exc, ConnectionError))

    async def _close(self) -> None:
        with _guard:
            if self._root._subscriptions.get(self._node) is self:
                del self._root._subscriptions[self._node]
        with contextlib.suppress(Exception):
            await self._pubsub.aclose()
        with contextlib.suppress(Exception):
            await self._pubsub.connection_pool.disconnect()

    async def aclose(self, timeout: float | None) -> None:
        """Close the connection now and end the reader (redlease.close())."""
        self._end(ConnectionError("redlease was closed for this client (redlease.close())"))
        reader = self._reader
        if reader is not None:
            reader.cancel()
        await self._close()
        if reader is not None:
            await reader.join(timeout)


def _without_frames(exc: _E) -> _E:
    """``exc`` without its traceback (see ``_core/kept.forget_frames``): a reply kept in a
    local of a frame its traceback passed would hold that frame, and its callers', in a cycle."""
    forget_frames(exc)
    return exc


def _refused(exc: BaseException) -> BaseException:
    """A refused SSUBSCRIBE as the hub's reader should see it: ASK (the slot is migrating)
    as a broken subscription, to be made again; any other refusal (NOPERM) as it is."""
    if isinstance(exc, AskError):
        return ConnectionError(f"the waiters' channel is moving: {exc}")
    return exc


@dataclass(frozen=True)
class AsyncClusterRenewal:
    """Renews batches of holdings on a cluster: one script call per slot, pipelined per node.

    A renewal script may touch one slot only, so the batch is split by slot; the calls for the
    slots of one node go out together on one connection, and every node is written to before
    any is read: one round trip per node per tick.
    """

    backend: AsyncClusterBackend

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]:
        """Per holding True (renewed) / False (lost); raises if a node did not answer (the
        watchdog then tries the whole batch again soon: renewing twice is harmless).

        Bounded by the shortest lease left in the batch, as on one server.
        """
        end = min(h.expires_at for h in due)
        with connecting_by(end):  # a connection opened for it: by the earliest lease end
            return await self._renew(script, due, end)

    async def _renew(self, script: Script, due: list[Holding], end: float) -> list[bool]:
        backend = self.backend
        by_node: dict[int, tuple[AsyncBackend, dict[int, list[int]]]] = {}
        for i, holding in enumerate(due):
            slot = key_slot(holding.key)
            node = await backend.owner(slot)
            by_node.setdefault(id(node), (node, {}))[1].setdefault(slot, []).append(i)
        left = max(end - time.monotonic(), MIN_WAIT)
        result: list[bool] = [False] * len(due)
        errors: list[Exception] = []
        sent: list[tuple[_Batch, list[list[int]]]] = []
        for node, slots in by_node.values():  # write to every node before reading any
            groups = list(slots.values())
            calls = [renewals.batch_call([due[i] for i in group]) for group in groups]
            try:
                sent.append((await _Batch.send(node, script, calls), groups))
            except RedisError as exc:
                errors.append(exc)
        for batch, groups in sent:
            replies = await batch.receive(left)
            for group, reply in zip(groups, replies, strict=True):
                if isinstance(reply, AskError):  # this slot moved: once on its new owner
                    keys, args = renewals.batch_call([due[i] for i in group])
                    try:
                        reply = await backend.run(script, keys, args, left)
                    except RedisError as exc:
                        reply = exc
                if isinstance(reply, Exception):
                    errors.append(reply)
                    continue
                try:
                    for i, ok in zip(group, renewals.decode(reply, len(group)), strict=True):
                        result[i] = ok
                except ValueError as exc:
                    errors.append(exc)
        if errors:
            for dropped in errors[:-1]:  # not left in a cycle (see kept.py)
                forget_frames(dropped)
            failed = errors[-1]
            if isinstance(failed, (ConnectionError, TimeoutError)):
                backend._broken()
            raise failed
        return result


class _Batch:
    """Script calls pipelined on one connection of one node: written at once, read in turn."""

    def __init__(self, node: AsyncBackend, conn: Any, script: Script, calls: list[Any]) -> None:
        self.node = node
        self.conn = conn
        self.script = script
        self.calls = calls
        self.sent_at = time.monotonic()

    @classmethod
    async def send(
        cls, node: AsyncBackend, script: Script, calls: list[tuple[list[bytes], list[Any]]]
    ) -> _Batch:
        """Write one EVALSHA per call in ``calls`` (KEYS, ARGV) on one connection of ``node``."""
        with node._translated():
            conn = await node._checkout()
        try:
            with node._translated():
                await conn.send_packed_command(
                    conn.pack_commands([("EVALSHA", script.sha, len(k), *k, *a) for k, a in calls])
                )
        except BaseException:
            await node._discard(conn)
            raise
        return cls(node, conn, script, calls)

    async def receive(self, timeout: float) -> list[Any]:
        """Each call's reply, or the error it got (within ``timeout`` of sending).

        A call the node answered NOSCRIPT is sent again with EVAL on the same connection.
        """
        node, conn = self.node, self.conn
        replies: list[Any] = []
        try:
            for _ in self.calls:
                try:
                    replies.append(await node._read(conn, self.sent_at, timeout))
                except ResponseError as exc:
                    replies.append(_without_frames(exc))
            for i, (keys, args) in enumerate(self.calls):
                if isinstance(replies[i], NoScriptError):
                    await conn.send_command("EVAL", self.script.source, len(keys), *keys, *args)
                    try:
                        replies[i] = await node._read(conn, self.sent_at, timeout)
                    except ResponseError as exc:
                        replies[i] = _without_frames(exc)
        except BaseException as exc:  # broken or late: the connection is out of sync
            await node._discard(conn)
            if not isinstance(exc, RedisError):
                raise
            return replies + [_without_frames(exc)] * (len(self.calls) - len(replies))
        await node._pool.release(conn)
        return replies
