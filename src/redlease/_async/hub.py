"""The waiter hub: one pub/sub subscription per client and process, shared by all waiters.

It listens on this process' own channel (``redlease:waiters:<process id>``), on which the lock
scripts address each message to one waiting token; see :mod:`redlease._core.waiters`. One
subscription serves every lock the process waits on. A reader (a thread, or a task in
asyncio) reads the connection, wakes the waiters the messages name, and wakes a waiter whose
predecessor's turn lapsed. It exits after ``linger`` seconds without waiters. If the
connection breaks, every waiter is woken to try again (messages may have been lost) and the
next one to wait subscribes again.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from redis.exceptions import RedisError

from .._core.lease import process_id
from .._core.waiters import (
    Action,
    Grantee,
    Waiter,
    WaiterTable,
    decode_claim,
    waiters_channel,
)
from .._logging import record
from .._synchronization import AsyncBackground, AsyncEvent
from .client import AsyncBackend

__all__ = ["AsyncHub"]

TICK = 1.0
"""Longest single blocking read, in seconds: far below redis-py's default socket timeout (5 s),
whose expiry would make the client reconnect and retry."""


class AsyncHub:
    """Pub/sub wake-ups for the blocked acquires of one client."""

    def __init__(
        self,
        backend: AsyncBackend,
        *,
        linger: float = 1.0,
        confirm_timeout: float = 5.0,
        channel: bytes | None = None,
    ) -> None:
        """``channel``: where to listen (default: this process' channel; on a Cluster, one
        hub per lock listens on a sharded channel in the lock's slot, see ``cluster.py``)."""
        self._backend = backend
        self._channel = channel
        self._linger = linger
        self._confirm_timeout = confirm_timeout
        self._table = WaiterTable()
        self._guard = threading.Lock()
        self._pubsub: Any = None
        self._reader: AsyncBackground | None = None
        self._broken: Exception | None = None  # what broke the last subscription

    @property
    def subscribed(self) -> bool:
        """Whether the subscription is confirmed (then a waiter may queue at once)."""
        return self._table.confirmed

    def join(
        self, token: bytes, event: AsyncEvent | None = None, grantee: Grantee | None = None
    ) -> Waiter:
        """Register a waiter (call :meth:`ensure` before relying on wake-ups).

        ``event`` is what wakes it; a Redlock waiter shares one event among its servers' hubs.
        ``grantee``: a release may grant it the lock directly (see :class:`Grantee`).
        """
        with self._guard:
            return self._table.add(token, event or AsyncEvent(), grantee)

    async def ensure(
        self, waiter: Waiter, deadline: float | None, confirm: float | None = None
    ) -> None:
        """Return once this process' channel is subscribed (at once if it already is).

        Returns early, unconfirmed, when ``deadline`` passes; raises ``RedisError`` when the
        subscription fails, its connection breaks, or it is not confirmed within ``confirm``
        seconds (default: the hub's ``confirm_timeout``).
        """
        limit = time.monotonic() + (self._confirm_timeout if confirm is None else confirm)
        while True:
            with self._guard:
                if self._table.confirmed:
                    return
                fresh = self._pubsub is None
                if fresh:
                    self._pubsub = self._backend.pubsub()
                pubsub = self._pubsub
            if fresh:
                try:
                    await pubsub.subscribe(self._channel or waiters_channel(process_id()))
                except BaseException:
                    with self._guard:
                        if self._pubsub is pubsub:
                            self._pubsub = None
                    await _close(pubsub)
                    raise
                with self._guard:
                    if self._pubsub is pubsub and self._reader is None:
                        self._reader = AsyncBackground(self._read, name="redlease-waiters")
            with self._guard:
                if self._pubsub is not pubsub:
                    cause = self._broken  # e.g. NOPERM: the ACL user may not use the channel
                    raise RedisError(
                        "the pub/sub connection broke while subscribing"
                        + ("" if cause is None else f": {cause}")
                    ) from cause
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return
            if now >= limit:
                raise RedisError("SUBSCRIBE to the waiters' channel was not confirmed in time")
            until = limit if deadline is None else min(limit, deadline)
            await waiter.event.wait(until - now)
            waiter.event.clear()

    def clock(self, server_ms: int, now: float) -> None:
        """A reply stamped by the server's clock, read at ``now``: it tells how late the
        grants are read (see :class:`~redlease._core.waiters.ServerClock`)."""
        with self._guard:
            self._table.clock.sample(server_ms, now)

    def leave(self, waiter: Waiter) -> None:
        """Unregister a waiter (it got the lock, or gave up)."""
        with self._guard:
            self._table.remove(waiter, time.monotonic())

    def refused(self, waiter: Waiter, held: bool, ms: int) -> None:
        """Record what the waiter's refused attempt said (lease left, or reservation left)."""
        with self._guard:
            self._table.refused(waiter, held, ms, time.monotonic())

    def plan(
        self, waiter: Waiter, deadline: float | None, fallback: float
    ) -> tuple[Action, float | None]:
        """The waiter's next step (see :meth:`WaiterTable.plan`)."""
        with self._guard:
            now = time.monotonic()
            # Its own timer may see the turn ahead lapse before the reader does (it then tries
            # at once, and the reader finds nothing due): log the skip here too. (The timer
            # may be the short lease of the grant ahead, which runs out with that turn.)
            waiting_turn = not waiter.woken and waiter.check_at is not None
            step = self._table.plan(waiter, deadline, now, fallback)
            lapsed = waiting_turn and step[0] is Action.ATTEMPT and waiter.check_at is None
        if lapsed:
            _log_lapsed(waiter)
        return step

    async def aclose(self, timeout: float | None) -> None:
        """Close the subscription and end the reader (waiting at most ``timeout`` seconds).

        The waiters still registered are woken: their next try finds the backend closed.
        """
        with self._guard:
            pubsub, self._pubsub = self._pubsub, None
            reader, self._reader = self._reader, None
            woken = self._table.on_disconnect()
        _signal(woken)
        if reader is not None:
            reader.cancel()  # a task is cancelled; a thread's read is cut short by the close
        if pubsub is not None:
            await _close(pubsub)
        if reader is not None:
            await reader.join(timeout)
            if pubsub is not None:
                await _close(pubsub)  # again: a read cut short may have reconnected it

    async def _read(self) -> None:
        with self._guard:
            pubsub = self._pubsub
        while True:
            with self._guard:
                check = self._table.next_check()
            wait = TICK if check is None else min(TICK, max(check - time.monotonic(), 0.0))
            try:
                message = await pubsub.get_message(timeout=wait)
            except Exception as exc:  # broken, or closed under us (client closed): start over
                with self._guard:
                    self._broken = exc
                    woken = self._table.on_disconnect()
                    mine = self._pubsub is pubsub  # else aclose() took it, and closes it
                    if mine:
                        self._pubsub = None
                        self._reader = None
                _signal(woken)
                if mine:
                    await _close(pubsub)
                return
            with self._guard:
                if self._pubsub is not pubsub:  # closed under us (aclose)
                    return
                now = time.monotonic()
                woken = []
                granted: list[Waiter] = []
                if message is not None:
                    kind = _text(message["type"])
                    if kind == "message":
                        woken = self._table.on_message(_bytes(message["data"]), now)
                        granted = [w for w in woken if w.grant is not None and w.grantee]
                    elif kind == "subscribe":
                        self._table.confirmed = True
                        woken = self._table.waiters()  # those in ensure() may go on
                lapsed = self._table.due(now)
                woken += lapsed
                done = self._table.idle(now, self._linger)
                if done:
                    self._table.confirmed = False
                    self._pubsub = None
                    self._reader = None
            if granted:
                await self._claim(granted, woken)
            else:
                _signal(woken)
            for waiter in lapsed:
                _log_lapsed(waiter)
            if done:
                await _close(pubsub)
                return

    async def _claim(self, granted: list[Waiter], woken: list[Waiter]) -> None:
        """Send the claims of the waiters granted the lock, wake the woken waiters, then read
        the claims' replies: a fresh grant's waiter returns from ``acquire()`` meanwhile. A
        grant read late is handed to its waiter only if its claim says the lock is still its
        (else the waiter tries again, as after any wake-up)."""
        claims: list[tuple[Waiter, Any, Any, float]] = []
        late: list[tuple[Waiter, Any]] = []
        for waiter in granted:
            grantee, grant = waiter.grantee, waiter.grant
            assert grantee is not None and grant is not None
            result = grantee.granted(grant[0], grant[1])
            if grant[2]:
                with self._guard:
                    waiter.result = result
            else:
                late.append((waiter, result))
            sent = time.monotonic()
            try:
                claims.append((waiter, result, await self._backend.send(*grantee.claim), sent))
            except RedisError as exc:  # it holds the grant's short lease: its renewer goes on
                self._claimed(waiter, result, exc, sent)
        _signal([w for w in woken if all(w is not x for x, _ in late)])
        for waiter, result, pending, sent in claims:
            try:
                ok, server_ms = decode_claim(await self._backend.receive(pending, None))
            except (RedisError, ValueError) as exc:
                self._claimed(waiter, result, exc, sent)
            else:
                with self._guard:
                    self._table.clock.sample(server_ms, time.monotonic())
                self._claimed(waiter, result, ok, sent)
        _signal([w for w, _ in late])

    def _claimed(self, waiter: Waiter, result: Any, ok: bool | BaseException, sent: float) -> None:
        """Apply a claim's outcome; a late grant goes to its waiter only when claimed."""
        grantee, grant = waiter.grantee, waiter.grant
        assert grantee is not None and grant is not None
        if not grant[2]:
            with self._guard:
                keep = ok is True and self._table.registered(waiter)
                if keep:
                    waiter.result = result
                waiter.grant = None
            if not keep:
                grantee.abandon(result)
                return
        grantee.claimed(result, ok, sent)


def _log_lapsed(waiter: Waiter) -> None:
    record(
        logging.INFO,
        "handoff_skipped",
        "the waiter ahead of %s did not take its turn within the hand-off window "
        "(dead or too slow): trying now, which skips it if it is still missing",
        waiter.token.decode("ascii", "replace"),
        token=waiter.token.decode("ascii", "replace"),
    )


def _signal(waiters: list[Waiter]) -> None:
    for waiter in waiters:
        waiter.event.set()


async def _close(pubsub: Any) -> None:
    with contextlib.suppress(Exception):  # best effort (a thread's read may race with it)
        await pubsub.aclose()


def _bytes(value: bytes | str) -> bytes:
    return value.encode() if isinstance(value, str) else value


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value
