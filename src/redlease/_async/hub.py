"""The waiter hub: one pub/sub subscription per client and process, shared by all waiters.

It listens on this process' own channel (``redlease:waiters:<process id>``), on which the lock
scripts address each message to one waiting token; see :mod:`redlease._core.waiters`. One
subscription serves every lock the process waits on. Whoever reads the connection wakes the
waiters the messages name, and a waiter whose predecessor's turn lapsed. If the connection
breaks, every waiter is woken to try again (messages may have been lost) and the next one to
wait subscribes again.

Who reads: a leader/follower hub, in threads and in asyncio: a waiting thread or task reads
the connection itself while nobody else does (:meth:`AsyncHub.wait`), so the message that ends
its wait wakes it directly; the other waiters sleep until the leader wakes them or, when it
stops reading, rings one of them to take over. A reader thread or task reads only while a
waiter cannot lead (a Redlock waiter waits on several hubs; and until the subscription is
confirmed); the subscription then stays open while the client's redlease runtime lives, like a
pooled connection.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Any

from redis.exceptions import RedisError

from .._core.bounds import TICK
from .._core.kept import kept
from .._core.lease import process_id
from .._core.waiters import (
    Action,
    Grantee,
    Waiter,
    WaiterTable,
    waiters_channel,
)
from .._logging import record
from .._synchronization import AsyncBackground, AsyncEvent
from .server import AsyncServer

__all__ = ["AsyncHub"]


class AsyncHub:
    """Pub/sub wake-ups for the blocked acquires of one client."""

    def __init__(
        self,
        backend: AsyncServer,
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
        # What broke the last subscription: a copy with no frames (see _core/kept.py); the
        # original's traceback would keep the reading thread's stack, and its handles, alive.
        self._broken: BaseException | None = None
        self._leader: Waiter | None = None  # the waiter whose thread reads (leader/follower)
        self._followers: list[Waiter] = []  # the waiters sleeping in wait() meanwhile

    @property
    def subscribed(self) -> bool:
        """Whether the subscription is confirmed (then a waiter may queue at once)."""
        return self._table.confirmed

    def join(
        self,
        token: bytes,
        event: AsyncEvent | None = None,
        grantee: Grantee | None = None,
        solo: bool = True,
    ) -> Waiter:
        """Register a waiter (call :meth:`ensure` before relying on wake-ups).

        ``event`` is what wakes it; a Redlock waiter shares one event among its servers' hubs
        (and is not ``solo``: it waits on other hubs too). ``grantee``: a release may grant it
        the lock directly (see :class:`Grantee`).
        """
        with self._guard:
            waiter = self._table.add(token, event or AsyncEvent(), grantee, solo)
            start = not solo and self._needs_reader()
            if start:
                self._reader = AsyncBackground(self._read, name="redlease-waiters")
        return waiter

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

    async def wait(self, waiter: Waiter, timeout: float | None) -> None:
        """Sleep until ``waiter`` is woken or ``timeout`` seconds pass (``None``: until woken).

        In a thread, the waiter reads the subscription itself while nobody else does (it
        leads); otherwise it sleeps on its event (it follows) until the reader wakes it, or
        rings it to lead in turn. Returns early on any wake-up: the caller plans again.
        """
        end = None if timeout is None else time.monotonic() + timeout
        event = waiter.event
        while True:
            with self._guard:
                lead = (
                    AsyncBackground.LEADS
                    and waiter.solo
                    and self._leader is None
                    and self._reader is None
                    and self._pubsub is not None
                    and self._table.confirmed
                    and self._table.registered(waiter)
                )
                if lead:
                    self._leader = waiter
                    pubsub = self._pubsub
                else:
                    self._followers.append(waiter)
            if lead:
                try:
                    await self._lead(pubsub, waiter, end)
                finally:
                    with self._guard:
                        self._leader = None
                        ring = self._successor()
                    _signal(ring)
                return
            left = None if end is None else max(end - time.monotonic(), 0.0)
            gone = True  # cancelled: a follower that is gone must not be left rung to lead
            try:
                await event.wait(left)
                gone = False
            finally:
                with self._guard:
                    self._followers.remove(waiter)
                    again = (
                        not gone
                        and waiter.promoted
                        and not waiter.woken
                        and waiter.result is None
                        and (end is None or time.monotonic() < end)
                    )
                    waiter.promoted = False
                    if again:
                        event.clear()  # rung only to lead: nothing happened to it
                        ring = []
                    else:
                        ring = self._successor()  # not leading after all: pass the ring on
                _signal(ring)
            if not again:
                return

    async def _lead(self, pubsub: Any, waiter: Waiter, end: float | None) -> None:
        """Read the subscription for every waiter until ``waiter`` is woken or ``end``."""
        while True:
            with self._guard:
                if waiter.woken or waiter.result is not None or self._pubsub is not pubsub:
                    return
                check = self._table.next_check()
            now = time.monotonic()
            if end is not None and now >= end:
                return
            wait = TICK if end is None else min(TICK, end - now)
            if check is not None:
                wait = min(wait, max(check - now, 0.0))
            if not await self._pump(pubsub, wait, lead=True):
                return

    def _needs_reader(self) -> bool:
        """Under the guard: whether to start a reader now (a waiter that cannot lead, a
        confirmed subscription nobody reads)."""
        return (
            self._reader is None
            and self._leader is None
            and self._pubsub is not None
            and self._table.confirmed
            and (not AsyncBackground.LEADS or self._table.needs_reader())
        )

    def _successor(self) -> list[Waiter]:
        """Under the guard, when a reader stops: ring a follower to lead, or start a reader
        for waiters that cannot lead. Returns the waiter to ring."""
        if self._leader is not None or self._reader is not None or self._pubsub is None:
            return []
        for follower in self._followers:
            if follower.solo:
                follower.promoted = True
                return [follower]
        if self._needs_reader():
            self._reader = AsyncBackground(self._read, name="redlease-waiters")
        return []

    @property
    def backend(self) -> AsyncServer:
        """The server this hub listens to (a grantee sends its claim there)."""
        return self._backend

    def settle(self, waiter: Waiter, result: Any) -> bool:
        """A grant is dealt with; ``result`` (``None``: nothing for it) goes to ``waiter`` if
        it still waits here (True): ``acquire()`` returns it once ``waiter`` is woken."""
        with self._guard:
            keep = result is not None and self._table.registered(waiter)
            if keep:
                waiter.result = result
            waiter.grant = None
        return keep

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
            if not await self._pump(pubsub, wait, lead=False):
                return
            if AsyncBackground.LEADS:
                with self._guard:
                    handover = (
                        self._pubsub is pubsub
                        and self._table.confirmed
                        and bool(self._table.waiters())
                        and not self._table.needs_reader()
                    )
                    if handover:  # every waiter can lead: one of them reads from now on
                        self._reader = None
                        ring = self._successor()
                if handover:
                    _signal(ring)
                    return

    async def _pump(self, pubsub: Any, wait: float, *, lead: bool) -> bool:
        """Read one message (at most ``wait`` seconds) and act on it; False: stop reading
        (the connection broke or was closed, or the hub went idle and closed it)."""
        try:
            message = await pubsub.get_message(timeout=wait)
        except Exception as exc:  # broken, or closed under us (client closed): start over
            with self._guard:
                self._broken = kept(exc, RedisError)
                woken = self._table.on_disconnect()
                mine = self._pubsub is pubsub  # else aclose() took it, and closes it
                if mine:
                    self._pubsub = None
                    if not lead:
                        self._reader = None
            _signal(woken)
            if mine:
                await _close(pubsub)
            return False
        with self._guard:
            if self._pubsub is not pubsub:  # closed under us (aclose)
                return False
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
            done = not lead and self._table.idle(now, self._linger)
            if done:
                self._table.confirmed = False
                self._pubsub = None
                self._reader = None
        if granted:
            try:
                await self._grant(granted, woken)
            except BaseException:  # a leading task cancelled: they try again, and claim
                self._wake_all(woken)
                raise
        else:
            _signal(woken)
        for waiter in lapsed:
            _log_lapsed(waiter)
        if done:
            await _close(pubsub)
            return False
        return True

    @staticmethod
    def _wake_all(woken: list[Waiter]) -> None:
        """Wake the waiters a message named whose grants were not all handed out."""
        _signal(woken)

    async def _grant(self, granted: list[Waiter], woken: list[Waiter]) -> None:
        """Hand each grant to its waiter's grantee, which sends the claim (if one is needed);
        wake the woken but the claiming, read the claims' replies, then wake those: a grant
        goes to its waiter once its claim said the lock is still its (see ``lock_claim.py``)."""
        replies = []
        for waiter in granted:
            assert waiter.grantee is not None
            reply = await waiter.grantee.take(self, waiter)
            if reply is not None:
                replies.append(reply)
        claiming = [reply.waiter for reply in replies]
        _signal([w for w in woken if all(w is not x for x in claiming)])
        for reply in replies:
            await reply.read()
        _signal(claiming)


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
