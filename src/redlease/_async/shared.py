"""The shell of a resource of N units shared by leased holders (``_core/shared.py``).

:class:`AsyncShared` is what a Semaphore's permits, a ReadWriteLock's read and write handles and
an Election's terms have in common: each acquisition is a :class:`Holding` of its own (its own
token, lease, fence and holder: the thread that acquired, or in asyncio the handle itself, on
its event loop), queued FIFO and woken through
the waiter hub by :func:`~redlease._async.waiting.wait_turn`, renewed by the runtime's watchdog
with ``shared_renew.lua``, and given back with ``shared_release.lua``. A subclass says how many
units one acquisition asks for, the capacity, and which errors it raises.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

import redis.asyncio

from .._core import shared, validate
from .._core.breakglass import ForceReleased
from .._core.holder import name_of
from .._core.lease import Holding, new_token
from .._core.lock import ACQUIRED
from .._core.shared import SharedKeys, Snapshot
from .._core.waiters import Outcome
from .._synchronization import AsyncBackground
from ..errors import RedleaseError
from .breakglass import force_release_shared
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["DEFAULT", "AsyncShared", "Errors"]

DEFAULT: Any = object()


@dataclass(frozen=True)
class Errors:
    """The errors a holder meets besides ``_unavailable_error`` (each takes ``(message,
    name=...)``)."""

    not_owned: type[RedleaseError]
    lost: type[RedleaseError]


class AsyncShared(AsyncPrimitive):
    """Acquisitions of units of one shared resource, held by a thread (asyncio: the handle)."""

    _errors: Errors
    _want = 1
    _stored = False  # the capacity is stored in Redis (Semaphore.set_permits)

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        ttl: float,
        timeout: float | None,
        renew: bool,
        on_lost: Callable[[], object] | None,
        handoff: float,
        keys: SharedKeys,
    ) -> None:
        check_client(client)
        options = validate.lease_options(
            ttl, timeout, renew, on_lost, handoff, coroutines=AsyncBackground.ASYNC
        )
        self._client = client
        self.name = name
        self._keys = keys
        self._ttl_ms = options.ttl_ms
        self.ttl = self._ttl_ms / 1000
        self.timeout = options.timeout
        self.renew = renew
        self._on_lost = options.on_lost
        self._window_ms = options.window_ms
        # holder (process and thread, or event loop) -> its acquisitions, latest last
        self._held: dict[Hashable, list[Holding]] = {}

    # -- what a primitive provides ----------------------------------------------------------
    def _capacity(self) -> int:
        """The capacity sent with each call (stored in Redis first when ``_stored``)."""
        return 1

    def _stored_capacity(self, stored: int) -> None:
        """Told the capacity stored in Redis at each acquisition, when ``_stored``."""

    # -- state ------------------------------------------------------------------------------
    def _mine(self) -> Holding | None:
        """The caller's latest acquisition through this handle (``None``: none).

        Sync: the calling thread's; asyncio: the handle's, on this event loop. Never a forked
        parent's."""
        stack = self._held.get(AsyncBackground.holder())
        return stack[_latest(stack)] if stack else None

    @property
    def fence(self) -> int | None:
        """The fencing token of the caller's latest acquisition (``None`` when none)."""
        holding = self._mine()
        return None if holding is None else holding.fence

    async def owned(self) -> bool:
        """Whether the caller's latest acquisition still holds its lease (one round trip)."""
        holding = self._mine()
        if holding is None:
            return False
        return (await self._snapshot(holding.token)).mine is not None

    def _forget_lost(self) -> None:
        """Drop the caller's holdings whose lease is known to be over (lost, or run out
        without a watchdog): local bookkeeping never outlives the lease it describes."""
        holder = AsyncBackground.holder()
        stack = self._held.get(holder)
        if not stack:
            return
        now = time.monotonic()
        for holding in [h for h in stack if not h.active or h.expires_at <= now]:
            holding.lost = True
            self._runtime().renewer.release(holding)
            stack.remove(holding)
        if not stack:
            del self._held[holder]

    # -- acquire ----------------------------------------------------------------------------
    def _deadline(self, blocking: bool, timeout: float | None) -> tuple[float | None, float | None]:
        limit = validate.wait_limit(blocking, timeout, self.timeout, given=timeout is not DEFAULT)
        return limit, None if limit is None else time.monotonic() + limit

    async def _take(
        self,
        deadline: float | None,
        *,
        over: bytes = b"",
        value: bytes | None = None,
        want: int | None = None,
    ) -> Holding | None:
        """Acquire ``want`` units (default ``_want``) by ``deadline``, held as one lease: the
        caller's new holding, or None."""
        owner, holder = AsyncBackground.owner(), AsyncBackground.holder()
        runtime = self._runtime()
        token = new_token(name_of(owner))

        async def attempt(join: bool) -> Outcome:
            sent = time.monotonic()
            status, ms = await self._attempt(token, join, deadline, over, value, want)
            if status == ACQUIRED:
                return Outcome(result=self._holding(owner, token, ms, sent))
            refusal = (0, status == 0, ms)
            return Outcome(refusals=(refusal,), answered=(0,), queued=(0,) if join else ())

        async def leave(servers: list[int], timeout: float | None) -> None:
            await self._run(shared.LEAVE, *self._queue_args(token), "leave the queue of", timeout)

        hub = runtime.hub_for(self._keys.holders)
        holding: Holding | None = await self._wait_turn(
            hub, token, attempt, leave, deadline=deadline, fallback=self.ttl
        )
        if holding is not None:
            holding.holder = holder
            self._held.setdefault(holder, []).append(holding)
            if self.renew:
                holding.renewed = True
                runtime.renewer.add(holding)
        return holding

    def _holding(self, owner: Hashable, token: bytes, fence: int, sent: float) -> Holding:
        return Holding(
            key=self._keys.holders,
            token=token,
            fence=fence,
            owner=owner,
            ttl_ms=self._ttl_ms,
            expires_at=sent + self.ttl,
            on_lost=self._on_lost,
            renew_script=shared.RENEW,
            renew_target=self._runtime().renewal,
        )

    async def _attempt(
        self,
        token: bytes,
        join: bool,
        deadline: float | None,
        over: bytes,
        value: bytes | None,
        want: int | None = None,
    ) -> tuple[int, int]:
        args: list[Any] = [
            token,
            self._ttl_ms,
            self._want if want is None else want,
            int(join),
            self._window_ms,
            self._channels(),
            self._capacity(),
            int(self._stored),
            over,
        ]
        if value is not None:
            args.append(value)
        raw = await self._run_or_undo(
            lambda: self._runtime().backend.run(shared.ACQUIRE, self._keys.in_order(), args),
            lambda timeout: self._undo(token, timeout),
            "acquire",
            deadline,
        )
        acquired = shared.decode_acquire(raw)
        if acquired.capacity is not None:
            self._stored_capacity(acquired.capacity)
        return acquired.reply.status, acquired.reply.value

    async def _undo(self, token: bytes, timeout: float | None) -> None:
        await self._run(shared.RELEASE, *self._queue_args(token), "release", timeout)

    # -- release ----------------------------------------------------------------------------
    async def _give(self, action: str = "release") -> Holding:
        """Release the caller's latest acquisition; raises not_owned / lost / unavailable."""
        holder = AsyncBackground.holder()
        stack = self._held.get(holder)
        if not stack:
            forked = any(h.inherited for held in self._held.values() for h in held)
            why = (
                "it was acquired by another process (this is a fork of it)"
                if forked
                else f"this {AsyncBackground.HOLDER} holds nothing through this handle"
            )
            raise self._errors.not_owned(
                f"cannot {action} {self._what} {self.name!r}: {why}", name=self.name
            )
        holding = stack.pop(_latest(stack))
        if not stack:
            del self._held[holder]
        if not self._runtime().renewer.release(holding):
            raise self._lost()
        released = await self._run(shared.RELEASE, *self._queue_args(holding.token), action)
        if not int(released):
            holding.lost = True
            raise self._lost()
        return holding

    # -- break-glass ------------------------------------------------------------------------
    async def _force_release(self, token: Any, primitive: str) -> ForceReleased:
        """Evict the holders (the one with ``token``, when given): see ``force_release``."""
        return await force_release_shared(
            self._client,
            self.name,
            self._keys,
            primitive=primitive,
            capacity=self._capacity(),
            stored=self._stored,
            token=token,
            handoff=self._window_ms / 1000,
            unavailable=self._unavailable_error,
        )

    # -- the conversation with Redis --------------------------------------------------------
    def _channels(self) -> bytes:
        """The prefix of the channels the scripts tell waiters on (see ``runtime.channels``)."""
        return self._runtime().channels(self._keys.holders)

    def _queue_args(self, token: bytes) -> tuple[list[bytes], list[Any]]:
        """KEYS and ARGV of shared_release.lua and shared_leave.lua (one contract)."""
        args = [token, self._window_ms, self._channels(), self._capacity(), int(self._stored)]
        return self._keys.in_order(), args

    async def _snapshot(self, token: bytes = b"") -> Snapshot:
        args = [token, self._capacity(), int(self._stored)]
        raw = await self._run(shared.INSPECT, self._keys.in_order(), args, "inspect")
        return shared.decode_inspect(raw, self.name, self._keys)

    # -- errors -----------------------------------------------------------------------------
    def _lost(self) -> RedleaseError:
        return self._errors.lost(
            f"{self._what} {self.name!r} was lost before release: its lease ran out",
            name=self.name,
        )


def _latest(stack: list[Holding]) -> int:
    """Where the caller's latest acquisition is in ``stack``: its own task's (thread's) if it
    has one, else the latest (asyncio: any task of the loop may release a held handle)."""
    owner = AsyncBackground.owner()
    for index in range(len(stack) - 1, -1, -1):
        if stack[index].owner is owner:
            return index
    return len(stack) - 1
