"""A fair Lock's claim: a waiter a release granted the lock to (``G``) takes up its own lease.

The hub that reads the grant hands it to the waiter's :class:`AsyncGrantee`
(:meth:`~AsyncGrantee.take`), which builds the holding ``acquire()`` returns and sends the claim
(``claim.lua``). The hub then wakes the woken waiters (a fresh grant's among them) and only
then has the replies read (:meth:`AsyncClaimReply.read`): ``acquire()`` returns without a round
trip of its own. A grant read late is handed to its waiter only once its claim says the lock is
still its. A reader that should not wait for the reply leaves a fresh grant's reply unread on
the holding (:class:`AsyncUnread`): whoever next relies on the lease reads it first.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from redis.exceptions import RedisError

from .. import _observe
from .._core.bounds import MIN_WAIT
from .._core.lease import Holding
from .._core.scripts import Script
from .._core.waiters import Waiter, decode_claim
from .hub import AsyncHub
from .runtime import AsyncRuntime
from .server import Pending

__all__ = ["AsyncClaimReply", "AsyncGrantee", "AsyncUnread"]


class AsyncGrantee:
    """How a fair Lock's waiter takes a grant its hub read (see ``waiters.Grantee``).

    ``claim``: the call (script, keys, args) that takes up its own lease of ``ttl_ms`` (a
    grant on that lease, read fresh, needs none); ``granted(fence,
    expires_at)`` builds the holding (``expires_at``: local monotonic end of the grant's short
    lease); ``runtime``: the lock's runtime (its renewer); ``renews()``: whether the lock's
    watchdog renews it (only then may a claim's reply be left unread).
    """

    def __init__(
        self,
        claim: tuple[Script, list[bytes], list[Any]],
        ttl_ms: int,
        granted: Callable[[int, float], Holding],
        runtime: Callable[[], AsyncRuntime],
        renews: Callable[[], bool],
    ) -> None:
        self.claim = claim
        self.ttl_ms = ttl_ms
        self._granted = granted
        self._runtime = runtime
        self._renews = renews

    async def take(self, hub: AsyncHub, waiter: Waiter, defer: bool) -> AsyncClaimReply | None:
        """Build the grant's holding and send the claim; the reply to read, or ``None`` (the
        call failed, or the reply was left unread on the holding). ``defer``: the hub's reader
        should not wait for replies: a fresh grant's reply is left to its holding."""
        grant = waiter.grant
        assert grant is not None
        fence, expires_at, fresh, lease_ms = grant
        result = self._granted(fence, expires_at)
        if fresh and lease_ms == self.ttl_ms:  # granted on its own lease: nothing to claim
            hub.hand(waiter, result)
            hub.settle(waiter, None)
            return None
        sent = time.monotonic()
        try:
            pending = await hub.backend.send(*self.claim)
        except RedisError as exc:  # it holds the grant's short lease: its renewer goes on
            if fresh:
                hub.hand(waiter, result)
            self.settle(hub, waiter, result, exc, sent)
            return None
        # Handed only once the claim is sent: a leading task cancelled before leaves the
        # waiter to try again, which claims the grant it finds (acquire_lib.lua's held()).
        if fresh:
            hub.hand(waiter, result)
        if defer and fresh:
            unread = AsyncUnread(hub, self, result, pending, sent)
            if self._unread(result, unread):
                hub.settle(waiter, None)
                return None
        return AsyncClaimReply(hub, self, waiter, result, pending, sent)

    def settle(
        self, hub: AsyncHub, waiter: Waiter, result: Holding, ok: bool | BaseException, sent: float
    ) -> None:
        """Apply a claim's outcome; a late grant goes to its waiter only when claimed."""
        grant = waiter.grant
        assert grant is not None
        if not grant[2] and not hub.settle(waiter, result if ok is True else None):
            self.abandon(result)
            return
        self.claimed(result, ok, sent)

    def claimed(self, holding: Holding, ok: bool | BaseException, sent_at: float) -> None:
        """Apply the claim's outcome (``ok``: True claimed, False lost, or the error of a call
        that failed) to the holding."""
        holding.settle = None
        if ok is True:
            if holding.active:
                holding.extended(sent_at, holding.ttl_ms)
        elif ok is False:  # the grant's short lease ran out before the claim landed
            if holding.active:
                _observe.lost(holding, "claim")
            # (off this thread: it may be a waiter reading the hub, or the watchdog)
            self._runtime().renewer.notify(holding.mark_lost())
        else:  # a failed call: the short lease stays, and the watchdog finds out, waiting
            holding.reach = sent_at + holding.ttl_ms / 1000  # as long as a landed claim lasts

    def abandon(self, holding: Holding) -> None:
        """Drop a holding the acquire did not return after all."""
        holding.released = True

    def _unread(self, holding: Holding, settle: AsyncUnread) -> bool:
        # Only a lease the watchdog renews: it settles in time should the holder not.
        if not self._renews():
            return False
        holding.settle = settle
        return True


class AsyncClaimReply:
    """A claim sent by :meth:`AsyncGrantee.take`, whose reply the hub's reader reads."""

    def __init__(
        self,
        hub: AsyncHub,
        grantee: AsyncGrantee,
        waiter: Waiter,
        result: Holding,
        pending: Pending,
        sent: float,
    ) -> None:
        self._hub = hub
        self._grantee = grantee
        self._waiter = waiter
        self._result = result
        self._pending = pending
        self._sent = sent

    async def read(self) -> None:
        """Read the claim's reply and apply it."""
        hub = self._hub
        ok: bool | BaseException
        try:
            ok, server_ms = decode_claim(await hub.backend.receive(self._pending, None))
        except (RedisError, ValueError) as exc:
            ok = exc
        else:
            hub.clock(server_ms, time.monotonic())
        self._grantee.settle(hub, self._waiter, self._result, ok, self._sent)


class AsyncUnread:
    """The unread reply to a fresh grant's claim: calling it reads and applies it, once
    (whoever calls first; a second caller returns at once). :meth:`behind` instead sends the
    holder's next call on the claim's connection, whose reply then comes with the claim's."""

    def __init__(
        self, hub: AsyncHub, grantee: AsyncGrantee, result: Holding, pending: Pending, sent: float
    ) -> None:
        self._hub = hub
        self._grantee = grantee
        self._result = result
        self._pending: Pending | None = pending
        self._sent = sent
        self._once = threading.Lock()

    async def behind(self, script: Script, keys: list[bytes], args: list[Any]) -> Pending | None:
        """Send ``script`` behind the claim, on its connection, unless the claim's reply was
        taken already (``None``). The reply to the Pending returned comes after the claim's,
        which is read and dropped (the call's own reply tells whether the lock was held)."""
        with self._once:
            pending, self._pending = self._pending, None
        if pending is None or self._hub.backend.closed:  # closed: nothing to send behind
            return None
        return await self._hub.backend.behind(pending, script, keys, args)

    async def __call__(self, by: float | None = None) -> None:
        """Read and apply the claim's reply; ``by``: not waiting past then (monotonic clock;
        the watchdog's bound, the grant's lease end), else within the socket timeout."""
        with self._once:
            pending, self._pending = self._pending, None
        if pending is None:
            return
        hub = self._hub
        timeout = None if by is None else max(by - pending.sent_at, MIN_WAIT)
        ok: bool | BaseException
        try:
            ok, server_ms = decode_claim(await hub.backend.receive(pending, timeout))
        except Exception as exc:  # any library's failure: the watchdog that reads it goes on
            ok = exc
        else:
            hub.clock(server_ms, time.monotonic())
        self._grantee.claimed(self._result, ok, self._sent)
