"""The asyncio API of redlease: the same names as :mod:`redlease`, with ``async`` methods.

::

    import redis.asyncio, redlease.asyncio
    r = redis.asyncio.Redis()
    async with redlease.asyncio.Lock(r, "orders:42") as lock:
        await write(order, fence=lock.fence)

Every method that talks to Redis is a coroutine (``acquire``, ``release``, ``extend``,
``locked``, ``owned``, ``remaining``); ``fence`` is a plain attribute. Locks belong to the task
that acquired them.
"""

from ._async.closing import close, closing
from ._async.fencing import AsyncFencedStore as FencedStore
from ._async.inventory import AsyncInventory as Inventory
from ._async.lock import AsyncLock as Lock
from ._async.lock import AsyncRLock as RLock
from ._async.ratelimit import AsyncRateLimiter as RateLimiter
from ._async.redlock import AsyncRedlock as Redlock
from ._core.fencing import FencedRecord
from ._core.inventory import Reservation, Stock
from ._core.lock import LockInfo
from ._core.ratelimit import RateLimit
from .errors import (
    FencedStoreUnavailable,
    FencingError,
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
    StaleFence,
    Unavailable,
)

__all__ = [
    "FencedRecord",
    "FencedStore",
    "FencedStoreUnavailable",
    "FencingError",
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
    "StaleFence",
    "Stock",
    "Unavailable",
    "close",
    "closing",
]
