"""The waiter hub: one pub/sub connection per client and process, shared by all waiters.

A blocked acquire joins the hub for its lock's channel and sleeps on its own event. One reader
(a thread, or a task in asyncio) reads the connection and wakes waiters as the
:class:`~redlease._core.waiters.WaiterTable` decides. Channels without waiters are unsubscribed
after ``linger`` seconds, and the reader exits when none are left. If the connection breaks,
every waiter is woken to try again (messages may have been lost) and the next join reconnects.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from .._core.waiters import Action, Waiter, WaiterTable
from .._synchronization import AsyncBackground, AsyncEvent

__all__ = ["AsyncHub"]

TICK = 1.0
"""Longest single blocking read, in seconds: far below redis-py's default socket timeout (5 s),
whose expiry would make the client reconnect and retry."""


class AsyncHub:
    """Pub/sub wake-ups for the blocked acquires of one client."""

    def __init__(
        self, client: redis.asyncio.Redis, *, linger: float = 1.0, confirm_timeout: float = 5.0
    ) -> None:
        self._client: Any = client
        self._linger = linger
        self._confirm_timeout = confirm_timeout
        self._table = WaiterTable()
        self._guard = threading.Lock()
        self._pubsub: Any = None
        self._sent: set[bytes] = set()  # channels SUBSCRIBE was sent for on self._pubsub
        self._reader: AsyncBackground | None = None

    @property
    def running(self) -> bool:
        """Whether the reader exists now."""
        return self._reader is not None

    def join(self, channel: bytes, token: bytes, event: AsyncEvent | None = None) -> Waiter:
        """Register a waiter for ``channel`` (call :meth:`ensure` before relying on wake-ups).

        ``event`` is what wakes it; a Redlock waiter shares one event among its servers' hubs.
        """
        with self._guard:
            waiter, _ = self._table.add(channel, token, event or AsyncEvent())
        return waiter

    async def ensure(
        self, waiter: Waiter, deadline: float | None, confirm: float | None = None
    ) -> None:
        """Return once the waiter's channel is subscribed (at once if it already is).

        Returns early, unconfirmed, when ``deadline`` passes; raises ``RedisError`` when the
        subscription fails, its connection breaks, or it is not confirmed within ``confirm``
        seconds (default: the hub's ``confirm_timeout``).
        """
        channel = waiter.channel
        limit = time.monotonic() + (self._confirm_timeout if confirm is None else confirm)
        while True:
            with self._guard:
                if self._table.confirmed(channel):
                    return
                if self._pubsub is None:
                    self._pubsub = self._client.pubsub()
                    self._sent = set()
                pubsub = self._pubsub
                send = channel not in self._sent
                self._sent.add(channel)
            if send:
                try:
                    await pubsub.subscribe(channel)
                except BaseException:
                    with self._guard:
                        self._sent.discard(channel)
                    raise
            with self._guard:
                if self._pubsub is not pubsub:
                    raise RedisError("the pub/sub connection broke while subscribing")
                if self._reader is None:
                    self._reader = AsyncBackground(self._read, name="redlease-waiters")
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if now >= limit:
                raise RedisError(f"SUBSCRIBE {channel!r} was not confirmed in time")
            until = limit if deadline is None else min(limit, deadline)
            await waiter.event.wait(until - now)
            waiter.event.clear()

    def leave(self, waiter: Waiter) -> None:
        """Unregister a waiter (it got the lock, or gave up); a wake it missed is passed on."""
        with self._guard:
            signal = self._table.remove(waiter, time.monotonic())
        _signal(signal)

    def refused(self, waiter: Waiter, held: bool, ms: int) -> None:
        """Record what the waiter's refused attempt said (lease left, or reservation left)."""
        with self._guard:
            self._table.refused(waiter, held, ms, time.monotonic())

    def plan(
        self, waiter: Waiter, deadline: float | None, fallback: float
    ) -> tuple[Action, float | None]:
        """The waiter's next step (see :meth:`WaiterTable.plan`)."""
        with self._guard:
            return self._table.plan(waiter, deadline, time.monotonic(), fallback)

    async def _read(self) -> None:
        with self._guard:
            pubsub = self._pubsub
        while True:
            try:
                message = await pubsub.get_message(timeout=TICK)
            except Exception:  # broken, or closed under us (the client was closed): start over
                with self._guard:
                    woken = self._table.on_disconnect()
                    if self._pubsub is pubsub:
                        self._pubsub = None
                        self._reader = None
                _signal(woken)
                await _close(pubsub)
                return
            resubscribe: list[bytes] = []
            with self._guard:
                now = time.monotonic()
                woken = []
                if message is not None:
                    kind, channel = _text(message["type"]), _bytes(message["channel"])
                    if kind == "message":
                        woken = self._table.on_message(channel, _bytes(message["data"]), now)
                    elif kind == "subscribe":
                        woken = self._table.on_subscribed(channel)
                    elif kind == "unsubscribe" and self._table.on_unsubscribed(channel):
                        resubscribe.append(channel)  # a waiter joined while we unsubscribed
                idle = self._table.idle(now, self._linger)
                self._sent.difference_update(idle)
                done = self._table.empty()
                if done:
                    self._pubsub = None
                    self._reader = None
            _signal(woken)
            try:
                if idle and not done:
                    await pubsub.unsubscribe(*idle)
                if resubscribe:
                    await pubsub.subscribe(*resubscribe)
            except (RedisError, OSError):
                continue  # the next read reports the broken connection
            if done:
                await _close(pubsub)
                return


def _signal(waiters: list[Waiter]) -> None:
    for waiter in waiters:
        waiter.event.set()


async def _close(pubsub: Any) -> None:
    with contextlib.suppress(RedisError, OSError):
        await pubsub.aclose()


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
