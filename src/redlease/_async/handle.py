"""What every lock handle does the same way, whatever it talks to (one server, or N).

Ownership (who may release: the thread that acquired, or any task of the event loop; see
``docs/safety.md``, "Who owns a lock"), the local queue of a shared handle, reentrancy,
the self-deadlock check, the context manager and the error messages live here once.
An acquire is :meth:`~AsyncHandle._enter` (checks, re-entry, the local mutex), the kind's
conversation with Redis, then :meth:`~AsyncHandle._entered` or :meth:`~AsyncHandle._failed`; a
release is :meth:`~AsyncHandle._let_go`, then Redis. :class:`~redlease._async.lock.AsyncLock`
calls the acquire's steps from its own ``acquire``, so that its calls only go down;
:class:`~redlease._async.redlock.AsyncRedlock` and the redis-py-keys lock still plug their
conversation into this module's ``acquire``, and every kind into its ``release``:
``_acquire``, ``_release_remote`` and ``_set_lease`` (Redlock also ``_runtime``: the client's
runtime, from :class:`AsyncPrimitive`, serves a Lock).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import Any, Generic, ParamSpec, TypeVar

from .. import _observe
from .._core import validate
from .._core.bounds import waited
from .._core.lease import Holding
from .._core.lock import LockKeys
from .._core.scripts import Script
from .._synchronization import AsyncBackground, AsyncFunction, AsyncMutex
from ..errors import LockLost, LockNotOwned, LockUnavailable, NotAcquired, Unavailable
from .primitive import AsyncPrimitive
from .waiting import past

__all__ = ["DEFAULT", "AsyncHandle", "AsyncHeld"]

DEFAULT: Any = object()
_Handle = TypeVar("_Handle", bound="AsyncHandle")
_Entry = tuple[bool | None, Hashable, Hashable, float | None, float]
"""An acquire on its way: ``(done, owner, holder, deadline, started)`` (``_enter``)."""
_P = ParamSpec("_P")
_R = TypeVar("_R")


class AsyncHandle(AsyncPrimitive):
    """The part of a lock handle that does not talk to Redis. Not used directly."""

    _reentrant = False
    _unavailable_error = LockUnavailable
    _what = "lock"

    def __init__(
        self,
        name: str | bytes,
        *,
        ttl: float,
        timeout: float | None,
        prefix: str,
        renew: bool,
        on_lost: Callable[[], object] | None,
        handoff: float,
    ) -> None:
        options = validate.lease_options(
            ttl, timeout, renew, on_lost, handoff, coroutines=AsyncBackground.ASYNC
        )
        self._on_lost = options.on_lost
        self.name = name
        self._prefix = validate.prefix(prefix)
        self._keys = LockKeys.build(self._prefix, validate.name(name))
        # How logs and metrics call it (redlease._observe): "lock", "rlock", "redlock", ...
        self._primitive = _primitive(type(self))
        self._label = name if isinstance(name, str) else name.decode("utf-8", "replace")
        self._ttl_ms = options.ttl_ms
        self.ttl = self._ttl_ms / 1000
        self.timeout = options.timeout
        self.renew = renew
        self._window_ms = options.window_ms
        self._mutex = AsyncMutex()
        self._holding: Holding | None = None
        self._count = 0  # acquisitions through this handle not yet released
        self._adopted: Holding | None = None  # taken over by adopt(): entered by ``with``

    # -- what a kind of lock provides -------------------------------------------------------
    async def _acquire(self, owner: Hashable, deadline: float | None) -> Holding | None:
        """Acquire in Redis by ``deadline``; a Holding, or None if it stayed held."""
        raise NotImplementedError

    async def _release_remote(self, holding: Holding) -> None:
        """Release in Redis; raise LockLost / LockUnavailable."""
        raise NotImplementedError

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        """Set the remaining lease in Redis (extend); raise LockLost / LockUnavailable."""
        raise NotImplementedError

    # -- state ------------------------------------------------------------------------------
    def __repr__(self) -> str:
        holding = self._holding
        state = "unlocked" if holding is None else f"held, fence={holding.fence}"
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl} {state}>"

    @property
    def fence(self) -> int | None:
        """The fencing token of the current acquisition (``None`` when not held, or held by
        another thread through this handle, or by the parent of this forked process)."""
        holding = self._held()
        return None if holding is None else holding.fence

    def _held(self) -> Holding | None:
        """This handle's holding if the caller may act on it (sync: its thread acquired it;
        asyncio: any task of its event loop; never a forked parent's), else ``None``."""
        holding = self._holding
        if holding is None or holding.holder != AsyncBackground.holder():
            return None
        return holding

    # -- acquire ----------------------------------------------------------------------------
    async def acquire(self, blocking: bool = True, timeout: float | None = DEFAULT) -> bool:
        """Acquire the lock; True if acquired, False if it stayed held for the whole timeout.

        ``timeout`` (seconds) defaults to the lock's; ``None`` or ``-1`` waits forever and
        ``blocking=False`` tries once. Raises :class:`~redlease.LockUnavailable` when Redis
        fails (an outage is never reported as ``False``).

        As with ``threading.Lock``, a lock the caller's own thread (task) already holds, through
        this handle or another, is contention: a non-blocking or timed acquire returns
        ``False``. Only a wait that could never end raises ``RuntimeError``: waiting forever for
        a lock the caller holds and keeps renewing (use :class:`RLock` to re-enter). A holding
        whose lease has run out is not held any more: the caller may take the lock again.
        """
        done, owner, holder, deadline, started = await self._enter(blocking, timeout)
        if done is not None:
            return done
        try:
            holding = await self._acquire(owner, deadline)
            while holding is not None and holding.ran_out(time.monotonic()):
                # Granted, but its lease ran out before acquire() could return it (a pause,
                # or servers that took longer than the lease to answer the rest): never
                # returned as held. The keys have expired with it; try again in the time left.
                _observe.lost(holding, "arrival")
                holding = None if past(deadline) else await self._acquire(owner, deadline)
        except BaseException as exc:
            self._failed(exc, locked=True)
            raise
        return self._entered(holding, holder, started)

    async def _enter(self, blocking: bool, timeout: float | None) -> _Entry:
        """What an acquire does before asking Redis: its argument checks, re-entry (RLock),
        the self-deadlock check and the handle's local mutex. ``(done, owner, holder,
        deadline, started)``: ``done`` set, the acquire is over (re-entered, or the mutex
        stayed taken); else the mutex is taken, and the acquire ends with :meth:`_entered` or
        :meth:`_failed`."""
        started = time.monotonic()
        _observe.waiting(self._primitive, self._label, 1)
        try:
            limit = validate.wait_limit(
                blocking, timeout, self.timeout, given=timeout is not DEFAULT
            )
            deadline = None if limit is None else time.monotonic() + limit
            owner, holder = AsyncBackground.owner(), AsyncBackground.holder()
            if self._holding is not None and self._holding.inherited:
                self._holding, self._count = None, 0  # a forked parent's: the child holds none
            now = time.monotonic()
            current = self._runtime().holdings.get(self._keys.lock)
            if current is not None and current.ran_out(now):
                current.lost = True  # its lease surely ran out (no watchdog): not held now
            if self._reentrant and any(
                h is not None
                and h.owner is owner
                and h.reentrant
                and not h.released
                and (h.lost or h.ran_out(now))
                for h in (current, self._holding if self._count else None)
            ):  # re-entry into a lease lost since, whoever found it lost: as _reenter says
                raise self._lost("was lost: its lease ran out or it was taken")
            self._forget_lapsed(holder, now)
            done: bool | None = None
            if current is not None and current.owner is owner and current.active:
                if self._reentrant and current.reentrant:
                    await self._reenter(current)
                    done = True
                elif limit is None and (current is self._holding or current.renewed):
                    raise RuntimeError(
                        f"lock {self.name!r} is already held by this {AsyncBackground.OWNER}: "
                        "waiting for it without a timeout would wait forever; use RLock for a "
                        "reentrant lock, or a timeout"
                    )
            if done is None and not await self._take_mutex(holder, deadline):
                done = False
        except BaseException as exc:
            self._failed(exc, locked=False)
            raise
        if done is not None:
            self._entered(None, holder, started, done=done)
        return done, owner, holder, deadline, started

    def _entered(
        self, holding: Holding | None, holder: Hashable, started: float, done: bool | None = None
    ) -> bool:
        """End an acquire: ``holding`` becomes this handle's (``None``: the lock stayed held,
        and the mutex is let go). ``done``: the acquire was over before it asked Redis
        (re-entered: True; the mutex stayed taken: False)."""
        if holding is not None:
            holding.acquired_at = time.monotonic()
            self._hold(holding, holder)
            done = True
        elif done is None:
            self._mutex.release()
            done = False
        _observe.waiting(self._primitive, self._label, -1)
        if done:
            _observe.acquired(self._primitive, self._label, time.monotonic() - started)
        else:
            _observe.not_acquired(self._primitive, self._label, time.monotonic() - started)
        return done

    def _failed(self, exc: BaseException, *, locked: bool) -> None:
        """End an acquire that raised ``exc`` (``locked``: with the handle's mutex taken)."""
        if locked:
            self._mutex.release()
        _observe.waiting(self._primitive, self._label, -1)
        if isinstance(exc, Unavailable):
            _observe.error(self._primitive, self._label, "acquire", exc)

    async def _take_mutex(self, holder: Hashable, deadline: float | None) -> bool:
        """Take the handle's local mutex by ``deadline``. While the caller's own holding keeps
        it, wait no longer than that holding's lease: once it has run out, it is forgotten
        and the mutex is free (local bookkeeping never outlives the lease it describes)."""
        while True:
            wait = _left(deadline)
            holding = self._holding
            if holding is not None and holding.holder == holder:
                lapse = max(holding.expires_at - time.monotonic(), 0.0)
                wait = lapse if wait is None else min(wait, lapse)
            if await self._mutex.acquire(wait):
                return True
            if deadline is not None and time.monotonic() >= deadline:
                return False
            self._forget_lapsed(holder, time.monotonic())

    def _hold(self, holding: Holding, holder: Hashable) -> None:
        """Make ``holding`` this handle's (its mutex taken), renewed if ``renew``."""
        holding.holder = holder
        runtime = self._runtime()  # the current one, should redlease have been closed meanwhile
        runtime.holdings[self._keys.lock] = holding
        if self.renew:
            holding.renewed = True
            runtime.renewer.add(holding)
        self._holding, self._count = holding, 1

    def _forget_lapsed(self, holder: Hashable, now: float) -> None:
        """Drop this handle's holding if the caller may act on it and its lease is over.

        Local bookkeeping never outlives the lease it describes: the handle is free again (as
        after a release that raised :class:`~redlease.LockLost`).
        """
        holding = self._holding
        if holding is None or holding.holder != holder:
            return
        if holding.active and not holding.ran_out(now):
            return
        holding.lost = True
        runtime = self._runtime()
        if runtime.holdings.get(holding.key) is holding:
            del runtime.holdings[holding.key]
        runtime.renewer.release(holding)
        self._holding, self._count = None, 0
        self._mutex.release()

    def _holding_for(
        self,
        owner: Hashable,
        token: bytes,
        fence: int,
        expires_at: float,
        renew_target: Hashable,
        renew_script: Script,
    ) -> Holding:
        return Holding(
            key=self._keys.lock,
            token=token,
            fence=fence,
            owner=owner,
            ttl_ms=self._ttl_ms,
            expires_at=expires_at,
            reentrant=self._reentrant,
            on_lost=self._on_lost,
            renew_script=renew_script,
            renew_target=renew_target,
            primitive=self._primitive,
            name=self._label,
        )

    async def _reenter(self, holding: Holding) -> None:
        """RLock re-entry by the holder: confirm and refresh the lease, then count."""
        await self._extend(holding, holding.ttl_ms)
        if self._holding is not holding:
            await self._mutex.acquire(None)  # free: this handle held nothing
            self._holding = holding
        holding.count += 1
        self._count += 1

    # -- release and extend -----------------------------------------------------------------
    async def release(self) -> None:
        """Release the lock.

        Raises :class:`~redlease.LockNotOwned` if this handle does not hold it (or another
        thread, another event loop or a forked parent does), :class:`~redlease.LockLost` if
        it held it but the lease ran out first, :class:`~redlease.LockUnavailable` if Redis
        failed: the handle no longer holds the lock in every case, and its lease is no longer
        renewed. In asyncio any task of the lock's event loop may release it (as with
        ``asyncio.Lock``); in threads only the thread that acquired it.
        """
        holding = self._let_go()
        if holding is None:
            return
        try:
            await self._release_remote(holding)
        except BaseException as exc:
            self._release_failed(holding, exc)
            raise
        _observe.released(holding, time.monotonic() - holding.acquired_at)

    def _let_go(self) -> Holding | None:
        """What a release does before telling Redis: the holding to release there (``None``:
        an RLock still held, by another count); raises LockNotOwned, or LockLost."""
        holding = self._owned_holding("release")
        self._count -= 1
        holding.count -= 1
        if self._count == 0:
            self._holding = None
            self._mutex.release()
        if holding.count > 0:
            if holding.lost:
                raise self._lost("was lost before this release")
            return None
        runtime = self._runtime()
        if runtime.holdings.get(holding.key) is holding:
            del runtime.holdings[holding.key]
        if not runtime.renewer.release(holding):
            raise self._lost("was lost before release: its lease ran out or it was taken")
        return holding

    def _release_failed(self, holding: Holding, exc: BaseException) -> None:
        """Log and count a release that raised ``exc`` in Redis."""
        if isinstance(exc, LockLost):
            _observe.lost(holding, "release")
        elif isinstance(exc, Unavailable):
            _observe.error(self._primitive, self._label, "release", exc)

    async def extend(self, ttl: float | None = None) -> None:
        """Set the remaining lease to ``ttl`` seconds (default: the lock's ttl); not added.

        The watchdog keeps renewing to this lease from then on. Raises
        :class:`~redlease.LockNotOwned` / :class:`~redlease.LockLost` like :meth:`release`.
        """
        ttl_ms = self._ttl_ms if ttl is None else validate.lease_ms(ttl)
        try:
            await self._extend(self._owned_holding("extend"), ttl_ms)
        except Unavailable as exc:
            _observe.error(self._primitive, self._label, "extend", exc)
            raise

    async def _extend(self, holding: Holding, ttl_ms: int) -> None:
        if holding.lost:
            raise self._lost("was lost: its lease ran out or it was taken")
        await self._set_lease(holding, ttl_ms)

    def _owned_holding(self, action: str) -> Holding:
        holding = self._holding
        if holding is None or self._count == 0:
            why = "this handle does not hold it"
        elif holding.inherited:
            why = f"it was acquired by another process (pid {holding.pid}; this is a fork of it)"
        elif holding.holder != AsyncBackground.holder():
            why = f"it is held by another {AsyncBackground.HOLDER}"
        else:
            return holding
        raise LockNotOwned(f"cannot {action} lock {self.name!r}: {why}", name=self.name)

    async def _give_up(self) -> Holding:
        """Stop owning and renewing the caller's holding without releasing it (``detach``):
        the lease runs on in Redis, and the handle is free again."""
        holding = self._owned_holding("detach")
        if holding.count != self._count:
            raise RuntimeError(
                f"cannot detach lock {self.name!r}: it is also held through another RLock "
                "object; release those acquisitions first"
            )
        runtime = self._runtime()
        if runtime.holdings.get(holding.key) is holding:
            del runtime.holdings[holding.key]
        self._holding, self._count = None, 0
        self._mutex.release()
        if not runtime.renewer.release(holding) or holding.lost:
            raise self._lost("was lost before detach: its lease ran out or it was taken")
        return holding

    def _mark_lost(self, holding: Holding) -> LockLost:
        """Record that ``holding`` is gone, tell ``on_lost``, and return the error to raise."""
        if holding.active:
            _observe.lost(holding, "extend")
        callback = holding.mark_lost()
        if callback is not None:
            AsyncBackground.call(callback)
        return self._lost("was lost: its lease ran out or it was taken")

    # -- decorator --------------------------------------------------------------------------
    def __call__(self, func: AsyncFunction[_P, _R]) -> AsyncFunction[_P, _R]:
        """Use the lock as a decorator: every call of ``func`` runs holding it.

        ``@lock`` over a function is ``with lock:`` around each call (so it waits up to the
        lock's ``timeout`` and raises :class:`~redlease.NotAcquired` when it stays held). An
        asyncio lock decorates coroutine functions, a sync lock plain ones; the other kind
        raises ``TypeError`` at once, not at the first call.
        """
        name = type(self).__name__.removeprefix("Async")
        validate.decorated(func, name, coroutine=AsyncBackground.ASYNC)

        @functools.wraps(func)
        async def locked(*args: _P.args, **kwargs: _P.kwargs) -> _R:
            async with self:
                return await func(*args, **kwargs)

        return locked

    # -- context manager --------------------------------------------------------------------
    async def __aenter__(self: _Handle) -> AsyncHeld[_Handle]:
        adopted, self._adopted = self._adopted, None
        if adopted is not None and adopted is self._held() and adopted.active:
            return AsyncHeld(self, adopted.fence)  # Lock.adopt(): held already
        if not await self.acquire():
            raise NotAcquired(
                f"lock {self.name!r} was held by another {waited(self.timeout)}",
                name=self.name,
            )
        holding = self._holding
        assert holding is not None
        return AsyncHeld(self, holding.fence)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.release()

    # -- errors -----------------------------------------------------------------------------
    def _lost(self, what: str) -> LockLost:
        return LockLost(f"lock {self.name!r} {what}", name=self.name)


class AsyncHeld(Generic[_Handle]):
    """What ``with lock as held:`` hands back: the lock, with ``fence`` typed ``int``.

    Inside the block the lock is held, so its fencing token is a number: ``held.fence`` is an
    ``int`` for type checkers, where ``lock.fence`` is ``int | None``. Every other attribute
    (``release``, ``extend``, ``remaining``, ``name``, ...) is the lock's own; ``held.lock`` is
    the lock itself.
    """

    __slots__ = ("fence", "lock")

    def __init__(self, lock: _Handle, fence: int) -> None:
        self.lock = lock
        self.fence = fence

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self.lock, attribute)

    def __repr__(self) -> str:
        return f"<held {self.lock!r}>"


def _primitive(cls: type) -> str:
    """``"lock"`` for Lock and AsyncLock (and a user's subclass of either), and so on."""
    for klass in cls.__mro__:
        if klass.__module__.startswith("redlease."):
            return klass.__name__.removeprefix("Async").lower()
    return cls.__name__.lower()  # pragma: no cover - every handle derives from ours


def _left(deadline: float | None) -> float | None:
    """Seconds until ``deadline`` (``None``: no deadline)."""
    return None if deadline is None else deadline - time.monotonic()
