"""A fair Lock's claim: a waiter a release granted the lock to (``G``) takes up its own lease.

The hub that reads the grant hands it to the waiter's :class:`AsyncGrantee`
(:meth:`~AsyncGrantee.take`), which builds the holding ``acquire()`` returns and sends the claim
(``claim.lua``). The hub wakes the other waiters the message named, reads the claim's reply
(:meth:`AsyncClaimReply.read`) and only then hands the holding to its waiter: ``acquire()``
returns a grant whose claim said the lock is still its, on its own lease.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from redis.exceptions import RedisError

from .._core.lease import Holding
from .._core.scripts import Script
from .._core.waiters import Waiter, decode_claim
from .hub import AsyncHub
from .server import Pending

__all__ = ["AsyncClaimReply", "AsyncGrantee"]


class AsyncGrantee:
    """How a fair Lock's waiter takes a grant its hub read (see ``waiters.Grantee``).

    ``claim``: the call (script, keys, args) that takes up its own lease; ``holding``: the
    holding a grant makes, but for its fence and lease end, whose ``ttl_ms`` is that lease (a
    grant on that lease, read fresh, needs no claim).
    """

    def __init__(self, claim: tuple[Script, list[bytes], list[Any]], holding: Holding) -> None:
        self.claim = claim
        self.ttl_ms = holding.ttl_ms
        self._holding = holding

    async def take(self, hub: AsyncHub, waiter: Waiter) -> AsyncClaimReply | None:
        """Build the grant's holding and send the claim; the reply for the hub to read, or
        ``None`` (nothing to claim, or the call failed: the grant is dealt with)."""
        grant = waiter.grant
        assert grant is not None
        fence, expires_at, fresh, lease_ms = grant
        # expires_at: the local monotonic end of the grant's short lease
        result = dataclasses.replace(self._holding, fence=fence, expires_at=expires_at)
        if fresh and lease_ms == self.ttl_ms:  # granted on its own lease: nothing to claim
            self.settle(hub, waiter, result, True, None)
            return None
        sent = time.monotonic()
        try:
            pending = await hub.backend.send(*self.claim)
        except RedisError as exc:
            self.settle(hub, waiter, result, exc, sent)
            return None
        return AsyncClaimReply(hub, self, waiter, result, pending, sent)

    def settle(
        self,
        hub: AsyncHub,
        waiter: Waiter,
        result: Holding,
        ok: bool | BaseException,
        sent: float | None,
    ) -> None:
        """Apply a claim's outcome (``ok``: True claimed, False lost, or the error of a call
        that failed; ``sent``: when the claim was sent, ``None``: none was needed) and hand
        the holding to the waiter if it is still its: claimed, or a fresh grant whose claim
        failed (it holds the grant's short lease, and the watchdog finds out, waiting as long
        as a landed claim lasts). A waiter not handed one tries again."""
        grant = waiter.grant
        assert grant is not None
        keep = ok is True or (grant[2] and not isinstance(ok, bool))
        if not hub.settle(waiter, result if keep else None):
            self.abandon(result)
            return
        if sent is None:
            return
        if ok is True:
            result.extended(sent, result.ttl_ms)
        else:
            result.reach = sent + result.ttl_ms / 1000

    def abandon(self, holding: Holding) -> None:
        """Drop a holding the acquire did not return after all."""
        holding.released = True


class AsyncClaimReply:
    """A claim sent by :meth:`AsyncGrantee.take`, whose reply the hub reads."""

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
        self.waiter = waiter
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
        self._grantee.settle(hub, self.waiter, self._result, ok, self._sent)
