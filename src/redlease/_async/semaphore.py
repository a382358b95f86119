"""Semaphore: N permits, each a lease renewed while held and returned when its holder dies."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType

import redis.asyncio

from .. import _observe
from .._core import validate
from .._core.bounds import waited
from .._core.breakglass import ForceReleased
from .._core.semaphore import SET_PERMITS, SemaphoreInfo, semaphore_info, semaphore_keys
from .._synchronization import AsyncBackground
from ..errors import NoPermit, PermitLost, PermitNotHeld, SemaphoreUnavailable
from .shared import DEFAULT, AsyncShared, Errors

__all__ = ["AsyncPermits", "AsyncSemaphore"]


class AsyncSemaphore(AsyncShared):
    """A counting semaphore of ``permits`` leased permits on one Redis server.

    ``Semaphore(client, name, permits, ttl=10.0, timeout=None)``: ``acquire()`` takes one
    permit for the calling thread (asyncio: for the handle), ``acquire(permits=3)`` three
    as one lease, ``release()`` gives back its latest acquisition; ``with sem`` (one) and
    ``with sem(permits=3)`` do both. Guaranteed, while the server keeps its data and clocks
    run at a sane rate:

    * never more than ``permits`` held at once (after ``set_permits`` lowered the count, no
      new permit is granted until the holders are under it; held ones are never revoked);
    * each permit is a lease on the server's clock, renewed by the watchdog every ``ttl / 3``:
      a crashed holder's permit comes back within ``ttl`` (Redisson's plain ``RSemaphore``
      leaks it forever);
    * waiters are served in strict FIFO order, woken by pub/sub (no polling), several at once
      when several permits free up; a waiter for more permits than are free blocks the ones
      behind it, so a large acquisition is never overtaken forever by small ones;
    * each permit gets a fencing token (``fence``), strictly increasing per name;
    * a holder learns it lost its permit (``on_lost``; ``release()`` raises
      :class:`~redlease.PermitLost`); a Redis failure raises
      :class:`~redlease.SemaphoreUnavailable`, never ``False``.

    The number of permits is stored in Redis: the first handle to use the name stores its
    ``permits``; :meth:`set_permits` changes it for every handle (the ``permits`` of later
    handles is then ignored). A handle whose ``permits`` differ from the stored count logs
    one WARNING (``redlease_event`` ``permits_mismatch``), at its first acquisition.
    """

    _unavailable_error = SemaphoreUnavailable
    _what = "semaphore"
    _errors = Errors(PermitNotHeld, PermitLost)
    _stored = True

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        permits: int,
        *,
        ttl: float = 10.0,
        timeout: float | None = None,
        prefix: str = "redlease",
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
        handoff: float = 0.05,
    ) -> None:
        """Describe a semaphore; nothing is sent to Redis until it is used.

        :param client: your redis-py client.
        :param name: the semaphore's name (str or bytes); keys are
            ``<prefix>:{<name>}:semaphore:...``.
        :param permits: how many may hold a permit at once (>= 1), stored on first use.
        :param ttl: each permit's lease in seconds; renewed while held.
        :param timeout: how long ``with`` and ``acquire()`` wait: ``None`` or ``-1`` forever,
            ``0`` one try.
        :param prefix: the key prefix (no white space or braces).
        :param renew: renew permits while held; ``False``: each ends after ttl.
        :param on_lost: called (from the watchdog) when a renewal finds a permit gone.
        :param handoff: seconds a freed permit stays reserved for a woken waiter before it
            is skipped as dead.
        """
        self.permits = validate.count(permits, "permits")
        self._mismatch_told = False  # permits_mismatch is logged once per handle
        super().__init__(
            client,
            name,
            ttl=ttl,
            timeout=timeout,
            renew=renew,
            on_lost=on_lost,
            handoff=handoff,
            keys=semaphore_keys(validate.prefix(prefix), validate.name(name)),
        )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} permits={self.permits} ttl={self.ttl}>"

    @classmethod
    async def force_release(
        cls,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        token: str | bytes | None = None,
    ) -> ForceReleased:
        """Break-glass: evict every permit held (only the holder with ``token``, as
        ``inspect().held_by`` shows it, when given), move the fence on and hand the permits
        to the waiters that fit.

        For an operator (``redlease release NAME --force``): the evicted holder's watchdog
        reports ``on_lost`` at its next renewal, and its fenced writes are refused once the
        next holder has written. Logged as a WARNING (``redlease_event`` ``force_released``).
        Raises :class:`~redlease.SemaphoreUnavailable` if Redis fails.
        """
        return await cls(client, name, 1, prefix=prefix)._force_release(token, "semaphore")

    def _capacity(self) -> int:
        return self.permits

    def _stored_capacity(self, stored: int) -> None:
        # Another count stored first (or set_permits elsewhere): said once per handle.
        if stored != self.permits and not self._mismatch_told:
            self._mismatch_told = True
            name = self.name if isinstance(self.name, str) else self.name.decode(errors="replace")
            _observe.permits_mismatch(name, self.permits, stored)

    async def acquire(
        self, blocking: bool = True, timeout: float | None = DEFAULT, permits: int = 1
    ) -> bool:
        """Take ``permits`` permits as one lease; True if taken, False if they did not come
        free within the timeout.

        ``timeout`` defaults to the semaphore's; ``None`` or ``-1`` waits forever,
        ``blocking=False`` tries once. ``permits`` (an int from 1 to the semaphore's
        ``permits``) is the weight of this acquisition: all of them are granted at once or
        none, in strict FIFO order (a waiter for 5 is not overtaken by later ones for 1), and
        ``release()`` gives them all back. The acquisition belongs to the calling thread
        (asyncio: to this handle, and any task of its event loop may release it); it may take
        several. Raises :class:`~redlease.SemaphoreUnavailable` when Redis fails.
        """
        want = self._weight(permits)
        _, deadline = self._deadline(blocking, timeout)
        return await self._take(deadline, want=want) is not None

    async def release(self) -> None:
        """Give back the caller's latest acquisition (all of its permits).

        Raises :class:`~redlease.PermitNotHeld` if the caller holds none through this
        handle, :class:`~redlease.PermitLost` if its lease ran out first,
        :class:`~redlease.SemaphoreUnavailable` if Redis failed (the permit is no longer
        renewed in every case).
        """
        await self._give()

    def __call__(self, permits: int = 1) -> AsyncPermits:
        """``with sem(permits=3):`` takes 3 permits as one lease (waiting up to the
        semaphore's ``timeout``, else :class:`~redlease.NoPermit`) and gives them back."""
        return AsyncPermits(self, self._weight(permits))

    def _weight(self, permits: int) -> int:
        """``permits`` checked: an int from 1 to this handle's ``permits`` (a larger one would
        wait at the head of the queue forever)."""
        weight = validate.count(permits, "permits")
        if weight > self.permits:
            raise ValueError(
                f"permits must be at most the {self.permits} permits of semaphore "
                f"{self.name!r}, got {weight}"
            )
        return weight

    async def available(self) -> int:
        """Permits free now (one round trip): the permits less those held, at least 0."""
        return (await self.inspect()).available

    async def set_permits(self, permits: int) -> int:
        """Set the number of permits for the next acquisitions; the previous number.

        Held permits are never revoked; with more permits, waiters that now fit are woken.
        """
        permits = validate.count(permits, "permits", minimum=0)
        args = [permits, self._window_ms, self._channels()]
        previous = await self._run(SET_PERMITS, self._keys.in_order(), args, "set the permits of")
        before, self.permits = self.permits, permits
        return int(previous) if int(previous) >= 0 else before

    async def inspect(self) -> SemaphoreInfo:
        """A snapshot (one round trip): permits, used, available, waiters, holders' leases."""
        tokens = {h.token for h in self._held.get(AsyncBackground.holder(), ())}
        return semaphore_info(await self._snapshot(), self.name, tokens)

    async def __aenter__(self) -> AsyncSemaphore:
        await _enter(self, 1)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()


class AsyncPermits:
    """``sem(permits=n)``: a context manager taking ``n`` permits of ``sem`` as one lease."""

    def __init__(self, semaphore: AsyncSemaphore, permits: int) -> None:
        self.semaphore = semaphore
        self.permits = permits

    async def __aenter__(self) -> AsyncSemaphore:
        await _enter(self.semaphore, self.permits)
        return self.semaphore

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.semaphore.release()


async def _enter(semaphore: AsyncSemaphore, permits: int) -> None:
    """Take ``permits`` for ``with``, or raise :class:`~redlease.NoPermit`."""
    if not await semaphore.acquire(permits=permits):
        what = "no permit" if permits == 1 else f"not {permits} permits"
        raise NoPermit(
            f"semaphore {semaphore.name!r} had {what} free {waited(semaphore.timeout)}",
            name=semaphore.name,
        )
