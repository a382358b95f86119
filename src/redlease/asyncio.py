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
from ._async.election import AsyncElection as Election
from ._async.fencing import AsyncFencedStore as FencedStore
from ._async.inventory import AsyncInventory as Inventory
from ._async.latch import AsyncCountDownLatch as CountDownLatch
from ._async.lock import AsyncLock as Lock
from ._async.lock import AsyncRLock as RLock
from ._async.once import AsyncOnce as Once
from ._async.once import AsyncOnceRun as OnceRun
from ._async.ratelimit import AsyncRateLimiter as RateLimiter
from ._async.redlock import AsyncRedlock as Redlock
from ._async.rwlock import AsyncReadWriteLock as ReadWriteLock
from ._async.semaphore import AsyncSemaphore as Semaphore
from ._cached import cached
from ._core.breakglass import ForceReleased
from ._core.election import ElectionInfo, Leader
from ._core.fencing import FencedRecord
from ._core.holder import HolderInfo
from ._core.inventory import Reservation, Stock
from ._core.latch import LatchInfo
from ._core.lock import LockInfo
from ._core.once import OnceInfo, OnceReleased
from ._core.ratelimit import RateLimit
from ._core.rates import Rate
from ._core.rwlock import ReadWriteLockInfo
from ._core.semaphore import SemaphoreInfo
from .errors import (
    AlreadyAdopted,
    AlreadyQueued,
    ElectionError,
    ElectionUnavailable,
    FencedStoreUnavailable,
    FencingError,
    ForeignData,
    InventoryError,
    InventoryUnavailable,
    LatchError,
    LatchUnavailable,
    LeadershipLost,
    LimitExceeded,
    LockError,
    LockLost,
    LockNotOwned,
    LockUnavailable,
    LockUpgradeError,
    NoPermit,
    NotAcquired,
    NotLeader,
    OnceError,
    OnceUnavailable,
    OrderClosed,
    OrderConflict,
    OrderNotFound,
    PermitLost,
    PermitNotHeld,
    QuorumUnavailable,
    RateLimitError,
    RateLimitExceeded,
    RateLimitUnavailable,
    RedleaseError,
    ReplicasUnavailable,
    RunLost,
    SemaphoreError,
    SemaphoreUnavailable,
    SoldOut,
    StaleFence,
    Unavailable,
)

__all__ = [
    "AlreadyAdopted",
    "AlreadyQueued",
    "CountDownLatch",
    "Election",
    "ElectionError",
    "ElectionInfo",
    "ElectionUnavailable",
    "FencedRecord",
    "FencedStore",
    "FencedStoreUnavailable",
    "FencingError",
    "ForceReleased",
    "ForeignData",
    "HolderInfo",
    "Inventory",
    "InventoryError",
    "InventoryUnavailable",
    "LatchError",
    "LatchInfo",
    "LatchUnavailable",
    "Leader",
    "LeadershipLost",
    "LimitExceeded",
    "Lock",
    "LockError",
    "LockInfo",
    "LockLost",
    "LockNotOwned",
    "LockUnavailable",
    "LockUpgradeError",
    "NoPermit",
    "NotAcquired",
    "NotLeader",
    "Once",
    "OnceError",
    "OnceInfo",
    "OnceReleased",
    "OnceRun",
    "OnceUnavailable",
    "OrderClosed",
    "OrderConflict",
    "OrderNotFound",
    "PermitLost",
    "PermitNotHeld",
    "QuorumUnavailable",
    "RLock",
    "Rate",
    "RateLimit",
    "RateLimitError",
    "RateLimitExceeded",
    "RateLimitUnavailable",
    "RateLimiter",
    "ReadWriteLock",
    "ReadWriteLockInfo",
    "RedleaseError",
    "Redlock",
    "ReplicasUnavailable",
    "Reservation",
    "RunLost",
    "Semaphore",
    "SemaphoreError",
    "SemaphoreInfo",
    "SemaphoreUnavailable",
    "SoldOut",
    "StaleFence",
    "Stock",
    "Unavailable",
    "cached",
    "close",
    "closing",
]
