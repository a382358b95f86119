"""redlease: distributed locks and coordination primitives on Redis, sync and asyncio.

::

    import redis, redlease
    r = redis.Redis()
    with redlease.Lock(r, "orders:42", ttl=10.0) as lock:
        write(order, fence=lock.fence)

The asyncio API has the same names in :mod:`redlease.asyncio`.
"""

# ruff: noqa: E402 (the version check runs before the imports that would fail on old redis-py)
from ._redispy_versions import check_redis_version

check_redis_version()  # before anything else: an unsupported redis-py fails here, clearly

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
from ._sync.closing import close, closing
from ._sync.election import Election
from ._sync.fencing import FencedStore
from ._sync.inventory import Inventory
from ._sync.latch import CountDownLatch
from ._sync.lock import Lock, RLock
from ._sync.once import Once, OnceRun
from ._sync.ratelimit import RateLimiter
from ._sync.redlock import Redlock
from ._sync.rwlock import ReadWriteLock
from ._sync.semaphore import Semaphore
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

__version__ = "0.1.0"

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
    "__version__",
    "cached",
    "close",
    "closing",
]
