"""Renewals on one server: a watchdog batch as a few script calls, one round trip."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.exceptions import ConnectionError

from .._core import renewals
from .._core.bounds import MIN_WAIT
from .._core.lease import Holding
from .._core.scripts import Script
from .server import AsyncServer, Pending, connecting_by

__all__ = ["AsyncServerRenewal"]


@dataclass(frozen=True)
class AsyncServerRenewal:
    """Renews batches of holdings on one server: one round trip per batch, however large.

    A batch of more than :data:`~redlease._core.renewals.CHUNK` holdings goes as several
    script calls, all sent before any reply is read (so that no single call blocks the server
    for long, and the batch still costs one round trip).
    """

    backend: AsyncServer

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]:
        """Per holding True (renewed) / False (lost); raises if the server did not answer.

        Everything is bounded by the earliest lease end in the batch: a new connection's
        handshake, the sends and the replies. On a hung server, waiting longer (for the
        socket timeout, e.g. because another caller holds the open connection) would only
        learn too late that the lease ran out, and tell ``on_lost`` late. A connection closed
        under the batch (killed, or dropped while kept) is tried once more on another at
        once, within the same bound: renewal scripts change nothing when run twice.
        """
        end = min(h.renew_by() for h in due)
        try:
            return await self._renew(script, due, end)
        except ConnectionError:
            if time.monotonic() >= end:
                raise
            return await self._renew(script, due, end)

    async def _renew(self, script: Script, due: list[Holding], end: float) -> list[bool]:
        limit = self.backend.socket_timeout  # (a long lease: no longer than any call)
        pending: list[Pending] = []
        try:
            with connecting_by(end):
                for chunk in renewals.chunks(due):
                    pending.append(await self.backend.send(script, *renewals.batch_call(chunk)))
            renewed: list[bool] = []
            for chunk in renewals.chunks(due):  # the replies come in the order sent
                call = pending.pop(0)
                left = max(end - call.sent_at, MIN_WAIT)
                if limit is not None:
                    left = min(left, limit)
                renewed += renewals.decode(await self.backend.receive(call, left), len(chunk))
            return renewed
        finally:
            for unread in pending:  # an error cut the batch short: close what is unread
                await self.backend.abandon(unread)
