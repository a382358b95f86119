"""The exception hierarchy of redlease.

Every error this library raises on purpose derives from :class:`RedleaseError`::

    RedleaseError
    ├── LockError
    │   ├── NotAcquired          the lock could not be had within the timeout (``with``)
    │   ├── LockNotOwned         this handle does not hold the lock (release twice, ...)
    │   │   └── LockLost         it held the lock, and the lease ran out or was taken
    │   └── LockUnavailable      Redis failed or could not be reached: the cause is chained
    └── (later primitives add their own branches: InventoryError, ...)

Bad arguments are not ``RedleaseError``: they raise ``ValueError`` / ``TypeError`` at once,
before anything is sent to Redis, with a message that names the argument.

An outage is never reported as contention: ``acquire()`` returns ``False`` only when the lock
is held by someone else; when Redis cannot answer it raises :class:`LockUnavailable` with the
redis-py exception as ``__cause__``.
"""

from __future__ import annotations

__all__ = [
    "LockError",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "NotAcquired",
    "RedleaseError",
]


class RedleaseError(Exception):
    """Base class of every error redlease raises on purpose.

    ``name`` is the primitive's name (``None`` where there is none), so a handler can log
    which lock or resource failed without parsing the message.
    """

    def __init__(self, message: str, *, name: str | bytes | None = None) -> None:
        super().__init__(message)
        self.name = name


class LockError(RedleaseError):
    """Base class of the errors of :class:`~redlease.Lock` and its relatives."""


class NotAcquired(LockError):
    """The lock was held by someone else for the whole timeout.

    Raised by ``with lock:``; ``lock.acquire()`` returns ``False`` instead.
    """


class LockNotOwned(LockError):
    """This handle does not hold the lock: released twice, or never acquired."""


class LockLost(LockNotOwned):
    """This handle held the lock, but its lease ran out (or was taken) before the call.

    Whatever the critical section wrote after that moment may have raced another holder;
    fencing tokens (``lock.fence``) let the storage reject those writes.
    """


class LockUnavailable(LockError):
    """Redis failed, or could not be reached, during a lock operation.

    The redis-py exception is chained as ``__cause__``. Nothing is left half-done in Redis:
    each operation is one atomic script, applied entirely or not at all. When an acquire may
    have been applied although its reply was lost, redlease tries once to release it; if Redis
    cannot be reached for that either, the lease runs out within ``ttl``.
    """
