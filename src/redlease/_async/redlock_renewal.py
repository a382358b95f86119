"""Redlock renewal: the watchdog's batches, renewed on a majority of N servers."""

from __future__ import annotations

import time
from dataclasses import dataclass

from redis.exceptions import RedisError

from .._core import redlock as core
from .._core import renewals
from .._core.kept import forget_frames
from .._core.lease import Holding
from .._core.scripts import Script
from .._fanout import AsyncFanOut
from .one_server import AsyncBackend
from .server import connecting_by

__all__ = ["AsyncQuorumRenewal"]


@dataclass(frozen=True)
class AsyncQuorumRenewal:
    """Renews batches of Redlock holdings on all their servers; each counts with a majority.

    Equal for Redlocks over the same servers and settings, so their renewals share one round.
    """

    backends: tuple[AsyncBackend, ...]
    quorum: int
    drift_factor: float
    timeout: float

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]:
        """Per holding True (renewed on a majority in time) / False (lost); raises
        ``RedisError`` when fewer than a majority answered (cannot tell)."""
        keys, args = renewals.batch_call(due)
        start = time.monotonic()
        end = min(h.expires_at for h in due)  # (a connection opened meanwhile: by then too)
        with connecting_by(max(end, start + self.timeout)):
            replies = await AsyncFanOut.run(
                [(backend, script, keys, args) for backend in self.backends], self.timeout
            )
        answered = []
        for reply in replies:
            if isinstance(reply, BaseException):  # dropped: not left in a cycle (see kept.py)
                forget_frames(reply)
            try:
                answered.append(renewals.decode(reply, len(due)))
            except (TypeError, ValueError):  # an exception in its place, or nonsense
                continue
        if len(answered) < self.quorum:  # cannot tell: try again soon, until validity ends
            raise RedisError(
                f"{len(answered)} of {len(self.backends)} servers answered, {self.quorum} needed"
            )
        elapsed = time.monotonic() - start
        return core.renewed(
            answered, [h.ttl_ms for h in due], elapsed, self.quorum, self.drift_factor
        )
