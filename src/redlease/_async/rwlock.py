"""ReadWriteLock: many readers or one writer, each hold its own lease, writers not starved."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, TypeVar

import redis.asyncio

from .._core import validate
from .._core.bounds import waited
from .._core.breakglass import ForceReleased
from .._core.lease import Holding
from .._core.rwlock import ReadWriteLockInfo, rwlock_info, rwlock_keys
from .._core.shared import EVERYTHING, Snapshot
from .._synchronization import AsyncBackground
from ..errors import LockLost, LockNotOwned, LockUnavailable, LockUpgradeError, NotAcquired
from .shared import DEFAULT, AsyncShared, Errors

__all__ = ["AsyncReadLock", "AsyncReadWriteLock", "AsyncWriteLock"]

_Side = TypeVar("_Side", bound="_AsyncSide")

_READS: weakref.WeakSet[Holding] = weakref.WeakSet()
_WRITES: weakref.WeakSet[Holding] = weakref.WeakSet()
"""Every read share and write hold of this process, across ReadWriteLock objects: a thread
(task) holding a name through one object is recognized by another object of the same name."""


def _held_by_caller(holds: weakref.WeakSet[Holding], holders: bytes) -> Holding | None:
    """The caller's live hold in ``holds`` of the lock whose holders key is ``holders``: one
    its thread (task) acquired in this process (as RLock re-entry, this is per task)."""
    owner = AsyncBackground.owner()
    for holding in list(holds):
        if (
            holding.key == holders
            and holding.owner is owner
            and holding.active
            and not holding.inherited
        ):
            return holding
    return None


class _AsyncSide(AsyncShared):
    """One side (read or write) of a :class:`ReadWriteLock`: a Lock-like handle."""

    _unavailable_error = LockUnavailable

    def __init__(self, rw: AsyncReadWriteLock, what: str, **options: object) -> None:
        self._what = what
        self._errors = Errors(LockNotOwned, LockLost)
        self._rw = rw
        super().__init__(rw._client, rw.name, keys=rw._keys, **options)  # type: ignore[arg-type]

    def _capacity(self) -> int:
        return EVERYTHING

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} fence={self.fence}>"

    # What the ReadWriteLock asks of a side (either: they share one lock's keys).
    async def _state(self) -> Snapshot:
        """The whole lock as its inspect script sees it."""
        return await self._snapshot()

    async def _evict(self, token: Any) -> ForceReleased:
        """Break-glass on the whole lock (see ``ReadWriteLock.force_release``)."""
        return await self._force_release(token, "rwlock")

    async def release(self) -> None:
        """Release the caller's latest hold of this side.

        Raises :class:`~redlease.LockNotOwned` if it holds none through this handle,
        :class:`~redlease.LockLost` if the lease ran out first,
        :class:`~redlease.LockUnavailable` if Redis failed.
        """
        await self._give()

    _holds: weakref.WeakSet[Holding]

    async def _hold(self, blocking: bool, timeout: float | None, over: bytes = b"") -> bool:
        _, deadline = self._deadline(blocking, timeout)
        holding = await self._take(deadline, over=over)
        if holding is None:
            return False
        self._holds.add(holding)
        return True

    async def __aenter__(self: _Side) -> _Side:
        if not await self.acquire():  # type: ignore[attr-defined]
            raise NotAcquired(
                f"{self._what} {self.name!r} was not free {waited(self.timeout)}",
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


class AsyncReadLock(_AsyncSide):
    """The read side: a share that any number of readers hold together (``rw.read``)."""

    _holds = _READS

    async def acquire(self, blocking: bool = True, timeout: float | None = DEFAULT) -> bool:
        """Take a read share; True, or False if a writer kept it for the whole timeout.

        Served in FIFO order: a reader that arrives after a waiting writer waits for it. The
        holder of the write lock may always take read shares too (its own writer does not
        block it).
        """
        writer = _held_by_caller(_WRITES, self._keys.holders)
        over = b"" if writer is None else writer.token
        return await self._hold(blocking, timeout, over)


class AsyncWriteLock(_AsyncSide):
    """The write side: held by one writer, when no reader holds a share (``rw.write``)."""

    _want = EVERYTHING
    _holds = _WRITES

    async def acquire(self, blocking: bool = True, timeout: float | None = DEFAULT) -> bool:
        """Take the write lock; True, or False if it was not free for the whole timeout.

        Raises :class:`~redlease.LockUpgradeError` when the caller holds a read share of
        this lock (it would wait for itself forever), and ``RuntimeError`` when the caller
        already holds the write lock and would wait forever for it.
        """
        self._forget_lost()
        mine = self._mine()
        if mine is not None and mine.owner is AsyncBackground.owner():
            limit, _ = self._deadline(blocking, timeout)
            if limit is None:
                raise RuntimeError(
                    f"write lock {self.name!r} is already held by this "
                    f"{AsyncBackground.OWNER}: waiting for it would wait forever"
                )
        if _held_by_caller(_READS, self._keys.holders) is not None:
            raise LockUpgradeError(
                f"read/write lock {self.name!r}: this {AsyncBackground.OWNER} holds a read "
                "share; taking the write lock would wait for itself forever. Release the "
                "read lock first (or take the write lock first: its holder may also read)",
                name=self.name,
            )
        return await self._hold(blocking, timeout)


class AsyncReadWriteLock:
    """A read/write lock on one Redis server: ``rw.read`` and ``rw.write`` are its handles.

    ``ReadWriteLock(client, name, ttl=10.0, timeout=None)``. Guaranteed, while the server
    keeps its data and clocks run at a sane rate:

    * any number of readers, or one writer, never both: every hold is a lease of its own on
      the server's clock, renewed by the watchdog, so a crashed reader frees its share (and
      a crashed writer the lock) within ``ttl``;
    * FIFO: a waiting writer stops the readers that come after it, so writers are not
      starved by a stream of readers; readers that queue together are woken together;
    * the write holder may also take the read lock; asking for the write lock while holding
      only the read lock raises :class:`~redlease.LockUpgradeError` instead of deadlocking;
    * every hold gets a fencing token (``fence``) from one strictly increasing counter, so a
      write hold's fence is larger than every earlier hold's;
    * a holder is told when its lease is lost (``on_lost``, ``release()`` raises
      :class:`~redlease.LockLost`); a Redis failure raises :class:`~redlease.LockUnavailable`.

    Holds belong to the thread that took them (asyncio: to the handle, and any task of its
    event loop may release them, as with ``asyncio.Lock``); one may hold several read shares.
    """

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
        """Describe a read/write lock; nothing is sent to Redis until it is used.

        :param client: your redis-py client.
        :param name: the lock's name (str or bytes); keys are ``<prefix>:{<name>}:rwlock:...``.
        :param ttl: each hold's lease in seconds; renewed while held.
        :param timeout: how long ``with`` and ``acquire()`` wait: ``None`` or ``-1`` forever,
            ``0`` one try.
        :param prefix: the key prefix (no white space or braces).
        :param renew: renew holds while held; ``False``: each ends after ttl.
        :param on_lost: called (from the watchdog) when a renewal finds a hold gone.
        :param handoff: seconds a freed lock stays reserved for the woken waiters before
            they are skipped as dead.
        """
        self._client = client
        self.name = name
        self._keys = rwlock_keys(validate.prefix(prefix), validate.name(name))
        options: dict[str, object] = {
            "ttl": ttl,
            "timeout": timeout,
            "renew": renew,
            "on_lost": on_lost,
            "handoff": handoff,
        }
        self.read = AsyncReadLock(self, "read lock", **options)
        self.write = AsyncWriteLock(self, "write lock", **options)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    @classmethod
    async def force_release(
        cls,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        token: str | bytes | None = None,
    ) -> ForceReleased:
        """Break-glass: evict every hold, readers and writer (only the holder with ``token``,
        as ``inspect().held_by`` shows it, when given), move the fence on and hand the lock
        to the waiters that fit.

        For an operator (``redlease release NAME --force``): the evicted holder's watchdog
        reports ``on_lost`` at its next renewal, and its fenced writes are refused once the
        next holder has written. Logged as a WARNING (``redlease_event`` ``force_released``).
        Raises :class:`~redlease.LockUnavailable` if Redis fails.
        """
        return await cls(client, name, prefix=prefix).read._evict(token)

    async def inspect(self) -> ReadWriteLockInfo:
        """A snapshot: readers, writer, waiters, last fence, the leases left (one round trip)."""
        return rwlock_info(await self.read._state(), self.name)
