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
from redis.exceptions import ConnectionError, RedisError, TimeoutError

from .._core import shared, validate
from .._core.bounds import budget
from .._core.breakglass import ForceReleased
from .._core.holder import name_of
from .._core.lease import Holding, new_token
from .._core.lock import ACQUIRED
from .._core.scripts import Script
from .._core.shared import SharedKeys, Snapshot
from .._core.waiters import Outcome
from .._synchronization import AsyncBackground, AsyncShield
from ..errors import RedleaseError, Unavailable
from .breakglass import force_release_shared
from .client import check_client
from .runtime import AsyncRuntime, runtime_for
from .waiting import wait_turn

__all__ = ["DEFAULT", "AsyncShared", "Errors"]

DEFAULT: Any = object()


@dataclass(frozen=True)
class Errors:
    """The errors one primitive raises (each takes ``(message, name=...)``)."""

    unavailable: type[Unavailable]
    not_owned: type[RedleaseError]
    lost: type[RedleaseError]
    what: str  # "semaphore ...", "read lock ...", in messages


class AsyncShared:
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
        if not isinstance(renew, bool):
            raise TypeError(f"renew must be a bool, got {type(renew).__name__}")
        self._client = client
        self.name = name
        self._keys = keys
        self._ttl_ms = validate.lease_ms(ttl)
        self.ttl = self._ttl_ms / 1000
        self.timeout = validate.timeout(timeout)
        self.renew = renew
        self._on_lost = validate.on_lost(on_lost, coroutines=AsyncBackground.ASYNC)
        self._window_ms = validate.window_ms(handoff, "handoff")
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

    def _runtime(self) -> AsyncRuntime:
        return runtime_for(self._client)

    # -- acquire ----------------------------------------------------------------------------
    def _deadline(self, blocking: bool, timeout: float | None) -> tuple[float | None, float | None]:
        if not blocking:
            if timeout is not DEFAULT and validate.timeout(timeout) is not None:
                raise ValueError("timeout must not be given when blocking is False")
            limit: float | None = 0.0
        else:
            limit = self.timeout if timeout is DEFAULT else validate.timeout(timeout)
        return limit, None if limit is None else time.monotonic() + limit

    async def _take(
        self, deadline: float | None, *, over: bytes = b"", value: bytes | None = None
    ) -> Holding | None:
        """Acquire ``_want`` units by ``deadline``: the caller's new holding, or None."""
        owner, holder = AsyncBackground.owner(), AsyncBackground.holder()
        runtime = self._runtime()
        token = new_token(name_of(owner))

        async def attempt(join: bool) -> Outcome:
            sent = time.monotonic()
            status, ms = await self._attempt(token, join, deadline, over, value)
            if status == ACQUIRED:
                return Outcome(result=self._holding(owner, token, ms, sent))
            refusal = (0, status == 0, ms)
            return Outcome(refusals=(refusal,), answered=(0,), queued=(0,) if join else ())

        async def leave(servers: list[int], timeout: float | None) -> None:
            try:
                await self._call(shared.LEAVE, self._queue_args(token), timeout)
            except RedisError as exc:
                raise self._unavailable("leave the queue of", exc) from exc

        holding: Holding | None = await wait_turn(
            [runtime.hub_for(self._keys.holders)],
            token,
            attempt,
            leave,
            deadline=deadline,
            socket_timeout=runtime.backend.socket_timeout,
            fallback=self.ttl,
            listen_error=self._listen_error,
        )
        if holding is not None:
            holding.holder = holder
            self._held.setdefault(holder, []).append(holding)
            if self.renew:
                holding.renewed = True
                runtime.renewer.add(holding)
        return holding

    def _listen_error(self, server: int, exc: RedisError) -> None:
        raise self._unavailable("wait for", exc) from exc

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
        self, token: bytes, join: bool, deadline: float | None, over: bytes, value: bytes | None
    ) -> tuple[int, int]:
        args: list[Any] = [
            token,
            self._ttl_ms,
            self._want,
            int(join),
            self._window_ms,
            self._channels(),
            self._capacity(),
            int(self._stored),
            over,
        ]
        if value is not None:
            args.append(value)
        try:
            raw = await self._call(shared.ACQUIRE, (self._keys.in_order(), args))
        except (ConnectionError, TimeoutError) as exc:
            # The script may have run and only its reply been lost: give back what may be ours.
            left = budget(deadline, self._runtime().backend.socket_timeout, time.monotonic())
            await AsyncShield.cleanup(lambda timeout: self._undo(token, timeout), left)
            raise self._unavailable("acquire", exc) from exc
        except RedisError as exc:
            raise self._unavailable("acquire", exc) from exc
        except BaseException:
            AsyncShield.background(lambda timeout: self._undo(token, timeout))
            raise
        acquired = shared.decode_acquire(raw)
        if acquired.capacity is not None:
            self._stored_capacity(acquired.capacity)
        return acquired.reply.status, acquired.reply.value

    async def _undo(self, token: bytes, timeout: float | None) -> None:
        await self._call(shared.RELEASE, self._queue_args(token), timeout)

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
                f"cannot {action} {self._errors.what} {self.name!r}: {why}", name=self.name
            )
        holding = stack.pop(_latest(stack))
        if not stack:
            del self._held[holder]
        if not self._runtime().renewer.release(holding):
            raise self._lost()
        try:
            released = await self._call(shared.RELEASE, self._queue_args(holding.token))
        except RedisError as exc:
            raise self._unavailable(action, exc) from exc
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
            unavailable=self._errors.unavailable,
        )

    # -- the conversation with Redis --------------------------------------------------------
    async def _call(
        self, script: Script, keys_args: tuple[list[bytes], list[Any]], timeout: float | None = None
    ) -> Any:
        return await self._runtime().backend.run(script, *keys_args, timeout)

    def _channels(self) -> bytes:
        """The prefix of the channels the scripts tell waiters on (see ``runtime.channels``)."""
        return self._runtime().channels(self._keys.holders)

    def _queue_args(self, token: bytes) -> tuple[list[bytes], list[Any]]:
        """KEYS and ARGV of shared_release.lua and shared_leave.lua (one contract)."""
        args = [token, self._window_ms, self._channels(), self._capacity(), int(self._stored)]
        return self._keys.in_order(), args

    async def _snapshot(self, token: bytes = b"") -> Snapshot:
        try:
            raw = await self._call(
                shared.INSPECT,
                (self._keys.in_order(), [token, self._capacity(), int(self._stored)]),
            )
        except RedisError as exc:
            raise self._unavailable("inspect", exc) from exc
        return shared.decode_inspect(raw, self.name, self._keys)

    # -- errors -----------------------------------------------------------------------------
    def _unavailable(self, action: str, exc: BaseException) -> Unavailable:
        return self._errors.unavailable(
            f"could not {action} {self._errors.what} {self.name!r}: Redis failed: {exc}",
            name=self.name,
        )

    def _lost(self) -> RedleaseError:
        return self._errors.lost(
            f"{self._errors.what} {self.name!r} was lost before release: its lease ran out",
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
