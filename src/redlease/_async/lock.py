"""Lock and RLock: a lease on one Redis server, fenced, renewed, fair, woken by pub/sub."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import Any

import redis.asyncio
from redis.exceptions import ConnectionError, RedisError, TimeoutError

from .._core import validate
from .._core.keys import LockKeys
from .._core.lease import HELD, Holding, Reply, decode_acquire, new_token
from .._core.scripts import ACQUIRE, EXTEND, INSPECT, LEAVE, RELEASE, Script
from .._core.waiters import Action
from .._synchronization import AsyncBackground, AsyncMutex, AsyncShield
from ..errors import LockLost, LockNotOwned, LockUnavailable, NotAcquired
from .client import check_client, run_script
from .runtime import AsyncRuntime, runtime_for

__all__ = ["AsyncLock", "AsyncRLock"]

_DEFAULT: Any = object()


class AsyncLock:
    """A distributed mutual-exclusion lock held as a lease on one Redis server.

    ``Lock(client, name, ttl=10.0, timeout=None)``: acquiring sets the key with a random token
    and a lease of ``ttl`` seconds; releasing deletes it only if the token is still ours. While
    held, a watchdog renews the lease every ``ttl / 3`` (``renew=False`` turns it off), so slow
    work keeps the lock and a dead process loses it within ``ttl``.

    Guaranteed, while the server keeps its data and clocks run at a sane rate:

    * at most one holder at a time: a holder's lease is only ever set by its own token;
    * ``fence`` strictly increases over the successive holders of a name, also after a lease
      ran out and someone else took it. Pass it to your storage and reject older ones: that
      keeps a paused or partitioned ex-holder from corrupting data;
    * waiters are served in the order they queued (across processes), woken by pub/sub when
      the lock is released, and retry when the lease they were told about runs out;
    * a holder learns it lost the lock: ``on_lost`` is called from the watchdog, and
      ``release()`` raises :class:`~redlease.LockLost`;
    * a Redis failure raises :class:`~redlease.LockUnavailable` (never ``False``).

    Not guaranteed (no lease-based lock can): exclusion when the holder pauses longer than the
    lease (GC, SIGSTOP, swap) and keeps writing without fencing; exclusion across a failover to
    a replica that had not received the lock (replication is asynchronous); see
    ``docs/safety.md``. Use :class:`~redlease.Redlock` against independent servers for the
    latter.

    A handle may be shared by threads (tasks): they queue locally, each acquisition gets its
    own token, and only the thread (task) that acquired may release. Acquiring again from the
    holder raises ``RuntimeError``: use :class:`RLock` for reentrancy.
    """

    _reentrant = False

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        ttl: float = 10.0,
        timeout: float | None = None,
        prefix: str = "redlease",
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
        handoff: float = 0.05,
    ) -> None:
        """Describe a lock; nothing is sent to Redis until :meth:`acquire`.

        :param client: your redis-py client (for a Sentinel master: ``sentinel.master_for()``).
        :param name: the lock's name (str or bytes); keys are ``<prefix>:{<name>}:...``.
        :param ttl: the lease in seconds (0 < ttl <= 30 days); renewed while held.
        :param timeout: how long ``with`` and ``acquire()`` wait: ``None`` or ``-1`` forever,
            ``0`` one try.
        :param prefix: the key prefix (no white space or braces).
        :param renew: renew the lease while held (the watchdog); ``False``: it ends after ttl.
        :param on_lost: called (from the watchdog) when a renewal finds the lock gone.
        :param handoff: seconds a released lock stays reserved for the next queued waiter
            before it is skipped as dead.
        """
        check_client(client)
        if not isinstance(renew, bool):
            raise TypeError(f"renew must be a bool, got {type(renew).__name__}")
        if on_lost is not None and not callable(on_lost):
            raise TypeError(f"on_lost must be callable or None, got {type(on_lost).__name__}")
        self._client = client
        self.name = name
        self._keys = LockKeys.build(validate.prefix(prefix), validate.name(name))
        self._ttl_ms = validate.ttl_ms(ttl)
        self.ttl = self._ttl_ms / 1000
        self.timeout = validate.timeout(timeout)
        self.renew = renew
        self._on_lost = on_lost
        self._window_ms = validate.window_ms(handoff, "handoff")
        self._mutex = AsyncMutex()
        self._holding: Holding | None = None
        self._count = 0  # acquisitions through this handle not yet released

    def __repr__(self) -> str:
        state = "unlocked" if self._holding is None else f"held, fence={self.fence}"
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl} {state}>"

    # -- state ------------------------------------------------------------------------------
    @property
    def fence(self) -> int | None:
        """The fencing token of the current acquisition (``None`` when not held)."""
        holding = self._holding
        return None if holding is None else holding.fence

    async def locked(self) -> bool:
        """Whether anyone holds the lock now (one round trip)."""
        pttl, _, _, _ = await self._inspect(b"")
        return pttl != -2

    async def owned(self) -> bool:
        """Whether this handle's current acquisition still holds the lock (one round trip)."""
        holding = self._holding
        if holding is None:
            return False
        _, mine, _, _ = await self._inspect(holding.token)
        return bool(mine)

    async def remaining(self) -> float | None:
        """Seconds left on this handle's lease: ``None`` if it holds nothing, 0.0 if lost."""
        holding = self._holding
        if holding is None:
            return None
        pttl, mine, _, _ = await self._inspect(holding.token)
        return max(pttl, 0) / 1000 if mine else 0.0

    # -- acquire ----------------------------------------------------------------------------
    async def acquire(self, blocking: bool = True, timeout: float | None = _DEFAULT) -> bool:
        """Acquire the lock; True if acquired, False if it stayed held by another.

        ``timeout`` (seconds) defaults to the lock's; ``None`` or ``-1`` waits forever and
        ``blocking=False`` tries once. Raises :class:`~redlease.LockUnavailable` when Redis
        fails (an outage is never reported as ``False``) and ``RuntimeError`` when the caller
        already holds this (non-reentrant) lock.
        """
        if not blocking:
            if timeout is not _DEFAULT and validate.timeout(timeout) is not None:
                raise ValueError("timeout must not be given when blocking is False")
            limit: float | None = 0.0
        else:
            limit = self.timeout if timeout is _DEFAULT else validate.timeout(timeout)
        deadline = None if limit is None else time.monotonic() + limit
        owner = AsyncBackground.owner()
        runtime = runtime_for(self._client)
        current = runtime.holdings.get(self._keys.lock)
        if current is not None and current.expires_at <= time.monotonic():
            current.lost = True  # its lease surely ran out (no watchdog): not held any more
        if current is not None and current.owner is owner and current.active:
            if self._reentrant and current.reentrant:
                return await self._reenter(current)
            raise RuntimeError(
                f"lock {self.name!r} is already held by this "
                f"{AsyncBackground.OWNER}: acquiring it again would wait "
                "for itself; use RLock for a reentrant lock"
            )
        if not await self._mutex.acquire(_left(deadline)):
            return False
        try:
            holding = await self._acquire(runtime, owner, deadline)
        except BaseException:
            self._mutex.release()
            raise
        if holding is None:
            self._mutex.release()
            return False
        self._holding, self._count = holding, 1
        return True

    async def _acquire(
        self, runtime: AsyncRuntime, owner: Hashable, deadline: float | None
    ) -> Holding | None:
        token = new_token()
        sent = time.monotonic()
        reply = await self._attempt(token, join=False)
        if reply.acquired:
            return self._hold(runtime, owner, token, reply.value, sent)
        if deadline is not None and time.monotonic() >= deadline:
            return None
        hub = runtime.hub
        waiter = hub.join(self._keys.channel, token)
        queued = False
        try:
            while True:
                try:
                    await hub.ensure(waiter, deadline)
                except RedisError as exc:
                    raise self._unavailable("wait for", exc) from exc
                sent = time.monotonic()
                reply = await self._attempt(token, join=True)
                queued = True
                if reply.acquired:
                    queued = False
                    return self._hold(runtime, owner, token, reply.value, sent)
                hub.refused(waiter, reply.status == HELD, reply.value)
                while True:
                    action, wait = hub.plan(waiter, deadline, self.ttl)
                    if action is Action.ATTEMPT:
                        break
                    if action is Action.GIVE_UP:
                        return None
                    await waiter.event.wait(wait)
                    waiter.event.clear()
        finally:
            hub.leave(waiter)
            if queued:  # leave the Redis queue too, and pass on a turn we were given
                await AsyncShield.cleanup(lambda: self._run(LEAVE, self._queue_args(token)))

    async def _attempt(self, token: bytes, *, join: bool) -> Reply:
        keys = self._keys
        try:
            raw = await self._run(
                ACQUIRE,
                (
                    [keys.lock, keys.fence, keys.queue, keys.handoff],
                    [token, self._ttl_ms, int(join), self._window_ms, keys.channel],
                ),
            )
        except (ConnectionError, TimeoutError) as exc:
            # The script may have run and only its reply been lost: release what may be ours.
            await AsyncShield.cleanup(lambda: self._run(RELEASE, self._queue_args(token)))
            raise self._unavailable("acquire", exc) from exc
        except RedisError as exc:
            raise self._unavailable("acquire", exc) from exc
        except BaseException:  # cancelled or interrupted with the script possibly applied
            await AsyncShield.cleanup(lambda: self._run(RELEASE, self._queue_args(token)))
            raise
        return decode_acquire(raw)

    def _hold(
        self, runtime: AsyncRuntime, owner: Hashable, token: bytes, fence: int, sent: float
    ) -> Holding:
        holding = Holding(
            key=self._keys.lock,
            token=token,
            fence=fence,
            owner=owner,
            ttl_ms=self._ttl_ms,
            expires_at=sent + self._ttl_ms / 1000,
            reentrant=self._reentrant,
            on_lost=self._on_lost,
        )
        runtime.holdings[self._keys.lock] = holding
        if self.renew:
            runtime.renewer.add(holding)
        return holding

    async def _reenter(self, holding: Holding) -> bool:
        """RLock re-entry by the holder: confirm and refresh the lease, then count."""
        await self._set_lease(holding, holding.ttl_ms)
        if self._holding is not holding:
            if self._count:  # pragma: no cover - a handle holds one acquisition at a time
                raise RuntimeError("this RLock handle holds another acquisition")
            await self._mutex.acquire(None)  # free: the holder is us
            self._holding = holding
        holding.count += 1
        self._count += 1
        return True

    # -- release and extend -----------------------------------------------------------------
    async def release(self) -> None:
        """Release the lock.

        Raises :class:`~redlease.LockNotOwned` if this handle does not hold it (or another
        thread/task does), :class:`~redlease.LockLost` if it held it but the lease ran out
        first, :class:`~redlease.LockUnavailable` if Redis failed: the handle no longer holds
        the lock in every case, and its lease is no longer renewed.
        """
        holding = self._owned_holding("release")
        self._count -= 1
        holding.count -= 1
        if self._count == 0:
            self._holding = None
            self._mutex.release()
        if holding.count > 0:
            if holding.lost:
                raise self._lost("was lost before this release")
            return
        runtime = runtime_for(self._client)
        if runtime.holdings.get(holding.key) is holding:
            del runtime.holdings[holding.key]
        if not runtime.renewer.release(holding):
            raise self._lost("was lost before release: its lease ran out or it was taken")
        try:
            released = await self._run(RELEASE, self._queue_args(holding.token))
        except RedisError as exc:
            raise self._unavailable("release", exc) from exc
        if not int(released):
            holding.lost = True
            raise self._lost("was lost before release: its lease ran out or it was taken")

    async def extend(self, ttl: float | None = None) -> None:
        """Set the remaining lease to ``ttl`` seconds (default: the lock's ttl); not added.

        The watchdog keeps renewing to this lease from then on. Raises
        :class:`~redlease.LockNotOwned` / :class:`~redlease.LockLost` like :meth:`release`.
        """
        ttl_ms = self._ttl_ms if ttl is None else validate.ttl_ms(ttl)
        holding = self._owned_holding("extend")
        await self._set_lease(holding, ttl_ms)

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        if holding.lost:
            raise self._lost("was lost: its lease ran out or it was taken")
        sent = time.monotonic()
        try:
            extended = await self._run(EXTEND, ([holding.key], [holding.token, ttl_ms]))
        except RedisError as exc:
            raise self._unavailable("extend", exc) from exc
        if not int(extended):
            callback = holding.mark_lost()
            if callback is not None:
                callback()
            raise self._lost("was lost: its lease ran out or it was taken")
        holding.extended(sent, ttl_ms)

    def _owned_holding(self, action: str) -> Holding:
        holding = self._holding
        if holding is None or self._count == 0:
            raise LockNotOwned(
                f"cannot {action} lock {self.name!r}: this handle does not hold it",
                name=self.name,
            )
        if holding.owner is not AsyncBackground.owner():
            raise LockNotOwned(
                f"cannot {action} lock {self.name!r}: it is held by another "
                f"{AsyncBackground.OWNER}",
                name=self.name,
            )
        return holding

    # -- context manager --------------------------------------------------------------------
    async def __aenter__(self) -> AsyncLock:
        if not await self.acquire():
            raise NotAcquired(
                f"lock {self.name!r} was held by another for the whole timeout "
                f"({self.timeout} s)",
                name=self.name,
            )
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    # -- plumbing ---------------------------------------------------------------------------
    async def _run(self, script: Script, keys_args: tuple[list[bytes], list[Any]]) -> Any:
        return await run_script(runtime_for(self._client).pool, script, *keys_args)

    async def _inspect(self, token: bytes) -> tuple[int, int, int, int]:
        keys = self._keys
        try:
            raw = await self._run(INSPECT, ([keys.lock, keys.fence, keys.queue], [token]))
        except RedisError as exc:
            raise self._unavailable("inspect", exc) from exc
        pttl, mine, fence, waiters = (int(x) for x in raw)
        return pttl, mine, fence, waiters

    def _queue_args(self, token: bytes) -> tuple[list[bytes], list[Any]]:
        """KEYS and ARGV of release.lua and leave.lua, which share their contract."""
        keys = self._keys
        return [keys.lock, keys.queue, keys.handoff], [token, self._window_ms, keys.channel]

    def _unavailable(self, action: str, exc: BaseException) -> LockUnavailable:
        return LockUnavailable(
            f"could not {action} lock {self.name!r}: Redis failed: {exc}", name=self.name
        )

    def _lost(self, what: str) -> LockLost:
        return LockLost(f"lock {self.name!r} {what}", name=self.name)


class AsyncRLock(AsyncLock):
    """A reentrant :class:`Lock`: the thread (task) that holds it may acquire it again.

    Re-entry refreshes the lease in one round trip (and raises :class:`~redlease.LockLost` if
    it was lost) and counts; the lock is released in Redis when the count drops to zero.
    Re-entry also works across separate ``RLock`` objects of the same name and client, like
    Redisson's RLock. The fencing token stays the one of the outermost acquisition.
    """

    _reentrant = True


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (``None``: no deadline)."""
    return None if deadline is None else deadline - time.monotonic()
