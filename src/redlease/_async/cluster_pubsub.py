"""Sharded pub/sub on a Redis Cluster: the waiters' channel of each lock, in the lock's slot.

The waiter hub of a lock subscribes with ``SSUBSCRIBE`` on the master owning its channel's
slot, on the one private connection the client keeps to that master for the channels of every
lock it waits on there (:class:`_NodeSubscriptions`), not one connection per waited lock.
When the slot moves (the node says ``sunsubscribe``) or the node dies, the subscription reports
a broken connection: the hub wakes every waiter to try again and subscribes anew, on the new
owner. redis-py's own cluster pub/sub is not used: it borrows the nodes' pools (which retry)
and its asyncio form arrived only in redis-py 8.
"""

from __future__ import annotations

import contextlib
import threading
from collections import deque
from typing import Any, Protocol

from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ConnectionError,
    MovedError,
    RedisError,
    ResponseError,
    TimeoutError,
)

from .._core.bounds import TICK
from .._core.kept import kept
from .._synchronization import AsyncBackground, AsyncEvent, AsyncMutex, ProcessLock
from .flavor import translate
from .one_server import AsyncBackend

__all__ = ["ShardedSubscriptions", "new_subscription"]

_guard = ProcessLock()


class _Router(Protocol):
    """What a subscription asks of the cluster backend (``cluster.AsyncClusterBackend``)."""

    @property
    def subscriptions(self) -> ShardedSubscriptions: ...

    async def owner(self, slot: int) -> AsyncBackend: ...

    def mark_stale(self) -> None: ...

    def redirected(self, slot: int, exc: AskError) -> AsyncBackend: ...


class ShardedSubscriptions:
    """Per master, the one SSUBSCRIBE connection of the locks waited on there."""

    def __init__(self) -> None:
        self._by_node: dict[AsyncBackend, _NodeSubscriptions] = {}

    def shared(self, router: _Router, node: AsyncBackend) -> _NodeSubscriptions:
        """The open connection to ``node`` (a new one if it has none, or it closed)."""
        with _guard:
            shared = self._by_node.get(node)
            if shared is None or shared.closed:
                shared = self._by_node[node] = _NodeSubscriptions(router, node)
            return shared

    def forget(self, node: AsyncBackend, shared: _NodeSubscriptions) -> None:
        """``shared`` closed: the next subscription to ``node`` opens a new connection."""
        with _guard:
            if self._by_node.get(node) is shared:
                del self._by_node[node]

    def get(self, node: AsyncBackend) -> _NodeSubscriptions | None:
        with _guard:
            return self._by_node.get(node)

    async def aclose(self, timeout: float | None) -> None:
        """Close every connection now and end their readers (redlease.close())."""
        with _guard:
            shared = list(self._by_node.values())
        for subscriptions in shared:
            await subscriptions.aclose(timeout)


def new_subscription(router: _Router) -> _ShardedSubscription:
    """A sharded subscription for one waiter hub (``router.pubsub()``)."""
    return _ShardedSubscription(router)


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

    def __init__(self, backend: _Router) -> None:
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
            self._backend.mark_stale()
            raise

    async def _subscribe_on(self, node: AsyncBackend) -> None:
        self._node = node
        while True:
            shared = self._backend.subscriptions.shared(self._backend, node)
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
            self._backend.mark_stale()
            if self._followed or self._closed:
                raise ConnectionError(f"the waiters' channel moved: {item}") from item
            # A refused SSUBSCRIBE subscribed nothing: subscribing on the node named, once,
            # repeats nothing (and the hub still waits for the confirmation from there).
            self._followed = True
            await self._subscribe_on(self._backend.redirected(key_slot(self._channel), item))
            return None
        if isinstance(item, BaseException):
            if isinstance(item, (ConnectionError, TimeoutError)):
                self._backend.mark_stale()
            raise item
        return item

    async def aclose(self) -> None:
        if self._node is not None and not self._closed:
            self._closed = True
            shared = self._backend.subscriptions.get(self._node)
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

    def __init__(self, root: _Router, node: AsyncBackend) -> None:
        self._root = root
        self._node = node
        self._pubsub: Any = node.library_pubsub()
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
            with self._node.translated():
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
                except self._node.foreign_errors as exc:  # valkey-py: redis-py's classes
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
        self._root.subscriptions.forget(self._node, self)
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


def _refused(exc: BaseException) -> BaseException:
    """A refused SSUBSCRIBE as the hub's reader should see it: ASK (the slot is migrating)
    as a broken subscription, to be made again; any other refusal (NOPERM) as it is."""
    if isinstance(exc, AskError):
        return ConnectionError(f"the waiters' channel is moving: {exc}")
    return exc
