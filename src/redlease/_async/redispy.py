"""redis-py's ``Lock`` API on a redlease :class:`~redlease.asyncio.Lock` (``redlease.compat``).

The public classes (``redlease.compat.Lock`` / ``AsyncLock``) add only ``acquire()``, whose
positional order differs between redis-py's sync and asyncio locks; the rest is here.
"""

from __future__ import annotations

import logging
from types import TracebackType
from typing import Any, Literal

import redis.asyncio
import redis.exceptions

from .._core import redispy as core
from .._logging import record
from ..errors import LockError as RedleaseLockError
from .lock import AsyncLock
from .redispy_keys import AsyncRedisPyKeysLock

__all__ = ["AsyncRedisPyLock"]


class AsyncRedisPyLock:
    """redis-py's ``Lock`` API, backed by a redlease lock (``self.lock``). Not used directly:
    see ``redlease.compat``."""

    def __init__(
        self,
        redis: redis.asyncio.Redis,
        name: str | bytes,
        timeout: float | None = None,
        sleep: float = 0.1,
        blocking: bool = True,
        blocking_timeout: float | None = None,
        thread_local: bool = True,
        raise_on_release_error: bool = True,
        *,
        lease: float = 10.0,
        prefix: str = "redlease",
        keys: str = "redlease",
    ) -> None:
        """Describe a lock as redis-py does; nothing is sent to Redis until :meth:`acquire`.

        :param redis: your redis-py client (what ``Redis.lock(lock_class=...)`` passes).
        :param name: the lock's name; redlease's keys are ``<prefix>:{<name>}:...``, not
            ``name`` itself, so a redis-py ``Lock`` of the same name does not exclude it
            (unless ``keys="redis-py"``).
        :param timeout: the lock's life in seconds: it expires then unless extended (not
            renewed). ``None``: a lease of ``lease`` seconds renewed by the watchdog while
            held, so a dead holder frees it within ``lease`` (redis-py's never expires).
        :param sleep: accepted and ignored: waiters are woken by pub/sub, in FIFO order
            (with ``keys="redis-py"``: the pause between two tries, as in redis-py).
        :param blocking: the default of ``acquire(blocking=)``.
        :param blocking_timeout: the default of ``acquire(blocking_timeout=)``: seconds to
            wait, ``None`` forever.
        :param thread_local: accepted and ignored: who may release or extend the lock is the
            redlease lock's rule (sync: the thread that acquired it).
        :param raise_on_release_error: ``False``: leaving ``with`` logs a warning, instead of
            raising, when the lock was no longer held.
        :param lease: redlease: the renewed lease of a ``timeout=None`` lock, in seconds.
        :param prefix: redlease: the key prefix.
        :param keys: redlease: ``"redlease"`` (redlease's keys: fair, fenced) or
            ``"redis-py"``: the lock is redis-py's own key ``name`` holding the token, so it
            excludes redis-py's ``Lock`` of that name and the other way round (a rolling
            migration); waiters poll every ``sleep`` seconds, and ``fence`` is the server's
            clock at the grant (see ``docs/moving-from-redis-py.md``).
        """
        ttl_ms = core.lock_timeout(timeout)
        lease = core.lease(lease, "lease")
        core.sleep(sleep)
        wait = core.blocking_timeout(blocking_timeout)
        self.redis = redis
        self.name = name
        self.timeout = None if ttl_ms is None else ttl_ms / 1000
        self.sleep = sleep
        self.blocking = bool(blocking)
        self.blocking_timeout = wait
        self.thread_local = bool(thread_local)
        self.raise_on_release_error = bool(raise_on_release_error)
        self.keys = core.keys(keys)
        ttl = lease if ttl_ms is None else ttl_ms / 1000
        self.lock: AsyncLock | AsyncRedisPyKeysLock
        """The redlease lock underneath (its ``fence``, ``remaining()``)."""
        if self.keys == "redlease":
            self.lock = AsyncLock(
                redis, name, ttl=ttl, timeout=wait, prefix=prefix, renew=ttl_ms is None
            )
        elif prefix != "redlease":
            raise ValueError("prefix applies to keys='redlease' only: redis-py's key is the name")
        else:
            pause = 0.1 if sleep is None else max(float(sleep), 0.001)  # never a tight loop
            self.lock = AsyncRedisPyKeysLock(
                redis, name, ttl=ttl, timeout=wait, renew=ttl_ms is None, sleep=pause
            )

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} timeout={self.timeout} on {self.lock!r}>"

    @property
    def fence(self) -> int | None:
        """The fencing token of the current acquisition (``None`` when not held)."""
        return self.lock.fence

    # -- acquire ----------------------------------------------------------------------------
    async def _acquire(
        self, blocking: bool | None, blocking_timeout: float | None, token: Any
    ) -> bool:
        core.token(token)
        wait = self.blocking_timeout
        if blocking_timeout is not None:
            wait = core.blocking_timeout(blocking_timeout)
        blocking = self.blocking if blocking is None else bool(blocking)
        try:
            if not blocking:
                return await self.lock.acquire(blocking=False)
            return await self.lock.acquire(timeout=wait)
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc

    async def __aenter__(self) -> AsyncRedisPyLock:
        if await self._acquire(None, None, None):
            return self
        raise core.NotAcquiredError(
            "Unable to acquire lock within the time specified", name=self.name
        )

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            await self.release()
        except redis.exceptions.LockError as error:
            if self.raise_on_release_error:
                raise
            record(
                logging.WARNING,
                "release_error",
                "Lock was unlocked or no longer owned when exiting context manager: %s",
                str(error),  # (not the error: a kept record would keep its frames)
                primitive="lock",
                name=self.name,
            )

    # -- state ------------------------------------------------------------------------------
    async def locked(self) -> bool:
        """Whether anyone holds the lock now."""
        try:
            return await self.lock.locked()
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc

    async def owned(self) -> bool:
        """Whether this handle (its current acquisition) holds the lock now."""
        try:
            return await self.lock.owned()
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc

    # -- release, extend, reacquire ---------------------------------------------------------
    async def release(self) -> None:
        """Release the lock: :class:`NotHeldError` (a ``LockError``) if not held by the
        caller, :class:`LockNotOwnedError` if its lease ran out or it was taken first."""
        try:
            await self.lock.release()
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc

    async def extend(self, additional_time: float, replace_ttl: bool = False) -> Literal[True]:
        """Add ``additional_time`` seconds to the lease left (``replace_ttl``: set it to that).

        Only for a lock with a ``timeout`` (a ``timeout=None`` lock is renewed by itself):
        :class:`LockError` otherwise, as in redis-py.
        """
        core.seconds(additional_time, "additional_time")
        self._check_held("extend")
        try:
            if replace_ttl:
                ttl = core.lease(additional_time, "additional_time")
            else:
                left = await self.lock.remaining()
                ttl = core.lease((left or 0.0) + additional_time, "additional_time")
            await self.lock.extend(ttl)
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc
        return True

    async def reacquire(self) -> Literal[True]:
        """Set the lease left back to ``timeout``: :class:`LockError` for ``timeout=None``."""
        self._check_held("reacquire")
        try:
            await self.lock.extend()
        except RedleaseLockError as exc:
            raise core.translate(exc, self.name) from exc
        return True

    def _check_held(self, action: str) -> None:
        if self.lock.fence is None:
            raise core.NotHeldError(f"Cannot {action} an unlocked lock", name=self.name)
        if self.timeout is None:
            raise core.LockError(
                f"Cannot {action} a lock with no timeout (redlease renews its lease while "
                "it is held)",
                name=self.name,
            )
