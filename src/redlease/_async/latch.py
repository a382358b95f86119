"""CountDownLatch: N count-downs release every waiter at once, woken by pub/sub."""

from __future__ import annotations

import time

import redis.asyncio

from .._core import latch, validate
from .._core.lease import new_token
from .._core.waiters import Outcome
from ..errors import LatchUnavailable
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncCountDownLatch"]

RECHECK = 10.0
"""Seconds between two looks of a waiter that heard nothing (a lost message costs this)."""


class AsyncCountDownLatch(AsyncPrimitive):
    """A latch on one Redis server: ``wait()`` blocks until ``count_down()`` was called n times.

    ``try_set_count(n)`` starts a round (only when the latch is not counting), each
    ``count_down()`` takes one off, and the one that reaches 0 releases every waiter in the
    same atomic script: each waiter is released once, and only once the count reached 0.
    Waiters are woken by pub/sub (no polling; a waiter that heard nothing looks again every
    10 s). A Redis failure raises :class:`~redlease.LatchUnavailable`.

    The latch is reusable: once open, ``try_set_count`` starts the next round. A waiter that
    began waiting in one round is released when that round ends, even if the next round has
    started by the time it looks.

    The count has no lease (see docs/safety.md): a process that dies before its
    ``count_down()`` leaves the round counting, and ``wait()`` returns False at its timeout.
    Count-downs are anonymous, so whoever knows a worker died may count down in its place.
    """

    _unavailable_error = LatchUnavailable
    _what = "latch"

    def __init__(self, client: redis.asyncio.Redis, name: str | bytes, *, prefix: str = "redlease"):
        """Describe a latch; nothing is sent to Redis until it is used.

        :param client: your redis-py client.
        :param name: the latch's name (str or bytes); keys are ``<prefix>:{<name>}:...``.
        :param prefix: the key prefix (no white space or braces).
        """
        check_client(client)
        self._client = client
        self.name = name
        self._keys = latch.LatchKeys.build(validate.prefix(prefix), validate.name(name))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    async def try_set_count(self, count: int) -> bool:
        """Start counting down from ``count`` (>= 1); False if the latch is counting already."""
        count = validate.count(count, "count")
        k = self._keys
        return bool(int(await self._run(latch.SET, [k.count, k.generation], [count], "set")))

    async def count_down(self) -> int:
        """Take one off the count; the count left (0: the latch is open, its waiters released).

        Counting down a latch that is not counting does nothing (and returns 0).
        """
        channels = self._runtime().channels(self._keys.count)
        reply = await self._run(latch.COUNT_DOWN, self._keys.in_order(), [channels], "count down")
        return int(reply)

    async def count(self) -> int:
        """The count left (0: not counting), one round trip."""
        return (await self.inspect()).count

    async def inspect(self) -> latch.LatchInfo:
        """A snapshot: count left, rounds completed, waiters."""
        raw = await self._run(latch.INSPECT, self._keys.in_order(), [], "inspect")
        return latch.decode_inspect(raw, self.name, self._keys)

    async def wait(self, timeout: float | None = None) -> bool:
        """Block until the count reaches 0; True, or False after ``timeout`` seconds.

        ``None`` or ``-1`` waits forever, ``0`` looks once. Returns at once when the latch is
        not counting.
        """
        limit = validate.timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        token = new_token()
        seen: list[bytes] = [b""]  # the generation of the first look
        keep = int(3 * RECHECK * 1000)

        async def attempt(join: bool) -> Outcome:
            args = [token, int(join), seen[0], keep]
            raw = await self._run(latch.WAIT, self._keys.in_order(), args, "wait for")
            is_open, generation = latch.decode_wait(raw)
            if is_open:
                return Outcome(result=True)
            if not seen[0]:
                seen[0] = str(generation).encode()
            return Outcome(refusals=((0, True, -1),), answered=(0,), queued=(0,) if join else ())

        async def leave(servers: list[int], timeout: float | None) -> None:
            await self._run(latch.LEAVE, [self._keys.waiters], [token], "leave", timeout)

        hub = self._runtime().hub_for(self._keys.count)
        result = await self._wait_turn(
            hub, token, attempt, leave, deadline=deadline, fallback=RECHECK
        )
        return bool(result)
