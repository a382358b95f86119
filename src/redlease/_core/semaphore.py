"""The leased semaphore's pure part: its keys, scripts and snapshot (over ``_core/shared``).

Every permit is one unit of a shared resource whose capacity is stored in Redis (the
``capacity`` key): the first handle to use a name stores its ``permits``, and
``set_permits(n)`` changes it for everyone (``lua/semaphore_set_permits.lua``). Each permit
taken is a lease of its own on the server's clock (``holders``: token -> lease end), renewed
by the watchdog and dropped when it runs out, so a crashed holder's permit comes back within
the ttl.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from .holder import HolderInfo
from .scripts import load
from .shared import SEMAPHORE, SharedKeys, Snapshot

__all__ = ["SET_PERMITS", "SemaphoreInfo", "semaphore_info", "semaphore_keys"]

SET_PERMITS = load("semaphore_set_permits", prelude=("common_lib", "shared_lib"))


def semaphore_keys(prefix: str, name: bytes) -> SharedKeys:
    """The keys of the semaphore ``name``: ``<prefix>:{<name>}:semaphore:<key>``."""
    return SharedKeys.build(prefix, name, SEMAPHORE)


@dataclass(frozen=True)
class SemaphoreInfo:
    """A snapshot of one semaphore, read atomically by ``Semaphore.inspect()``.

    ``permits``: the current number of permits; ``used``: permits held now (may exceed
    ``permits`` after ``set_permits`` lowered it: held permits are never revoked);
    ``available``: ``max(permits - used, 0)``; ``waiters``: acquisitions queued; ``mine``:
    permits the caller holds through this handle; ``holders``: seconds left on each
    holding's lease, soonest first; ``units``: the permits of each holding, in the same
    order (an ``acquire(permits=3)`` is one holding of 3); ``fence``: the last fencing token
    issued.
    """

    name: str | bytes
    permits: int
    used: int
    available: int
    waiters: int
    mine: int
    holders: tuple[float, ...]
    fence: int
    held_by: tuple[HolderInfo, ...] = ()
    units: tuple[int, ...] = ()


def semaphore_info(
    snapshot: Snapshot, name: str | bytes, tokens: Collection[bytes] = ()
) -> SemaphoreInfo:
    """The :class:`SemaphoreInfo` of a shared resource snapshot; ``tokens``: the caller's."""
    return SemaphoreInfo(
        name=name,
        permits=snapshot.capacity,
        used=snapshot.used,
        available=max(snapshot.capacity - snapshot.used, 0),
        waiters=snapshot.waiters,
        mine=sum(h.units for h in snapshot.holders if h.token in tokens),
        holders=tuple(h.remaining for h in snapshot.holders),
        fence=snapshot.fence,
        held_by=tuple(h.info() for h in snapshot.holders),
        units=tuple(h.units for h in snapshot.holders),
    )
