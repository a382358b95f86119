"""A lock in redis-py's own key: ``redlease.compat`` locks with ``keys="redis-py"``.

The lock is the key ``name`` holding the holder's token, set by ``SET name token NX PX`` and
released by compare-and-delete, as redis-py's ``Lock`` does: during a rolling migration the
processes still on redis-py's lock and those on ``redlease.compat`` exclude each other, and
``r.exists(name)`` / ``r.ttl(name)`` keep their meaning. Kept from redlease: the watchdog
(a ``timeout=None`` lock is a renewed lease, freed when its holder dies), the owner rule,
``on_lost``, the errors. Not kept: fair FIFO hand-off (waiters poll every ``sleep`` seconds,
as redis-py's do: nobody tells them of a redis-py release) and a counter-based fence (the
fence is the server's clock at the grant, in µs; redis-py's holders have none).
"""

from __future__ import annotations

import time
from collections.abc import Hashable

import redis.asyncio

from .._core import redispy as core
from .._core import validate
from .._core.holder import name_of
from .._core.lease import Holding, new_token
from .._core.lock import EXTEND, RENEW, LockKeys
from .._synchronization import AsyncEvent
from .flavor import check_client
from .handle import AsyncHandle

__all__ = ["AsyncRedisPyKeysLock"]


class AsyncRedisPyKeysLock(AsyncHandle):
    """A lock held as redis-py's key ``name`` (see the module). Not used directly: see
    ``redlease.compat.Lock(..., keys="redis-py")``."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        ttl: float,
        timeout: float | None,
        renew: bool,
        sleep: float,
    ) -> None:
        """Describe the lock; nothing is sent to Redis until :meth:`acquire`.

        :param ttl: the lease in seconds (renewed while held if ``renew``).
        :param timeout: how long ``acquire()`` waits by default (``None``: forever).
        :param sleep: seconds between two tries while the lock is held by another.
        """
        check_client(client)
        self._client = client
        super().__init__(
            name, ttl=ttl, timeout=timeout, prefix="redlease", renew=renew, on_lost=None,
            handoff=0.25,
        )  # fmt: skip
        key = validate.name(name)
        self._keys = LockKeys(lock=key, fence=b"", queue=b"", handoff=b"")  # only .lock used
        self._primitive = "lock"
        self._sleep = sleep

    # -- state ------------------------------------------------------------------------------
    async def locked(self) -> bool:
        """Whether anyone holds the lock now (this lock or a redis-py one)."""
        return (await self._inspect(b""))[0]

    async def owned(self) -> bool:
        """Whether this handle's current acquisition still holds the lock."""
        holding = self._held()
        return holding is not None and (await self._inspect(holding.token))[1]

    async def remaining(self) -> float | None:
        """Seconds left on this handle's lease: ``None`` if it holds nothing, 0.0 if lost."""
        holding = self._held()
        if holding is None:
            return None
        _, mine, ms = await self._inspect(holding.token)
        return max(ms, 0) / 1000 if mine else 0.0

    async def _inspect(self, token: bytes) -> tuple[bool, bool, int]:
        raw = await self._run(core.INSPECT, [self._keys.lock], [token], "inspect")
        return core.decode_inspect(raw)

    # -- the conversation with Redis --------------------------------------------------------
    async def _acquire(self, owner: Hashable, deadline: float | None) -> Holding | None:
        key, token = self._keys.lock, new_token(name_of(owner))
        pause = AsyncEvent()  # never set: a sleep between tries
        while True:
            sent = time.monotonic()
            raw = await self._run_or_undo(
                lambda: self._runtime().backend.run(core.ACQUIRE, [key], [token, self._ttl_ms]),
                lambda timeout: self._undo(token, timeout),
                "acquire",
                deadline,
            )
            acquired, value = core.decode_acquire(raw)
            if acquired:
                renewal = self._runtime().renewal
                return self._holding_for(owner, token, value, sent + self.ttl, renewal, RENEW)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            await pause.wait(self._sleep if left is None else min(self._sleep, left))

    async def _undo(self, token: bytes, timeout: float | None) -> None:
        """Release an acquisition whose reply was lost (quietly)."""
        await self._run(core.RELEASE, [self._keys.lock], [token], "release", timeout)

    async def _release_remote(self, holding: Holding) -> None:
        released = await self._run(core.RELEASE, [holding.key], [holding.token], "release")
        if not int(released):
            holding.lost = True
            raise self._lost("was lost before release: its lease ran out or it was taken")

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        sent = time.monotonic()
        extended = await self._run(EXTEND, [holding.key], [holding.token, ttl_ms], "extend")
        if not int(extended):
            raise self._mark_lost(holding)
        holding.extended(sent, ttl_ms)
