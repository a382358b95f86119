"""The asyncio API of redlease: the same names as :mod:`redlease`, with ``async`` methods.

    import redis.asyncio, redlease.asyncio
    r = redis.asyncio.Redis()
    async with redlease.asyncio.Lock(r, "orders:42") as lock:
        await write(order, fence=lock.fence)

Every method that talks to Redis is a coroutine (``acquire``, ``release``, ``extend``,
``locked``, ``owned``, ``remaining``); ``fence`` is a plain attribute. Locks belong to the task
that acquired them.
"""

from ._async.lock import AsyncLock as Lock
from ._async.lock import AsyncRLock as RLock
from .errors import (
    LockError,
    LockLost,
    LockNotOwned,
    LockUnavailable,
    NotAcquired,
    RedleaseError,
)

__all__ = [
    "Lock",
    "LockError",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "NotAcquired",
    "RLock",
    "RedleaseError",
]
