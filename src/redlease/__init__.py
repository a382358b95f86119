"""redlease: distributed locks and coordination primitives on Redis, sync and asyncio.

    import redis, redlease
    r = redis.Redis()
    with redlease.Lock(r, "orders:42", ttl=10.0) as lock:
        write(order, fence=lock.fence)

The asyncio API has the same names in :mod:`redlease.asyncio`.
"""

from ._sync.lock import Lock, RLock
from .errors import (
    LockError,
    LockLost,
    LockNotOwned,
    LockUnavailable,
    NotAcquired,
    RedleaseError,
)

__version__ = "0.1.0"

__all__ = [
    "Lock",
    "LockError",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "NotAcquired",
    "RLock",
    "RedleaseError",
    "__version__",
]
