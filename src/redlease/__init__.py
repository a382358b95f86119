"""redlease: distributed locks and coordination primitives on Redis, sync and asyncio.

::

    import redis, redlease
    r = redis.Redis()
    with redlease.Lock(r, "orders:42", ttl=10.0) as lock:
        write(order, fence=lock.fence)

The asyncio API has the same names in :mod:`redlease.asyncio`.
"""

from ._core.inventory import Reservation, Stock
from ._core.lock import LockInfo
from ._core.ratelimit import RateLimit
from ._sync.inventory import Inventory
from ._sync.lock import Lock, RLock
from ._sync.ratelimit import RateLimiter
from ._sync.redlock import Redlock
from .errors import (
    ForeignData,
    InventoryError,
    InventoryUnavailable,
    LimitExceeded,
    LockError,
    LockLost,
    LockNotOwned,
    LockUnavailable,
    NotAcquired,
    OrderClosed,
    OrderConflict,
    OrderNotFound,
    QuorumUnavailable,
    RateLimitError,
    RateLimitUnavailable,
    RedleaseError,
    ReplicasUnavailable,
    SoldOut,
    Unavailable,
)

__version__ = "0.1.0"

__all__ = [
    "ForeignData",
    "Inventory",
    "InventoryError",
    "InventoryUnavailable",
    "LimitExceeded",
    "Lock",
    "LockError",
    "LockInfo",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "NotAcquired",
    "OrderClosed",
    "OrderConflict",
    "OrderNotFound",
    "QuorumUnavailable",
    "RLock",
    "RateLimit",
    "RateLimitError",
    "RateLimitUnavailable",
    "RateLimiter",
    "RedleaseError",
    "Redlock",
    "ReplicasUnavailable",
    "Reservation",
    "SoldOut",
    "Stock",
    "Unavailable",
    "__version__",
]
