"""The read/write lock's pure part: its snapshot (the rest is ``_core/shared.py``).

A ReadWriteLock is a shared resource of :data:`~redlease._core.shared.EVERYTHING` units: a
reader asks for one unit, a writer for all of them, so any number of readers or one writer
hold it, each hold a lease of its own. The queue is strict FIFO: a waiting writer stops the
readers that come after it (no writer starvation). A writer's hold may take read shares past
the queue (``over`` in ``shared_acquire.lua``). Every hold, and so every write hold, gets a
fencing token from one counter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .holder import HolderInfo
from .shared import EVERYTHING, RWLOCK, SharedKeys, Snapshot

__all__ = ["ReadWriteLockInfo", "rwlock_info", "rwlock_keys"]


def rwlock_keys(prefix: str, name: bytes) -> SharedKeys:
    """The keys of the read/write lock ``name``: ``<prefix>:{<name>}:rwlock:<key>``."""
    return SharedKeys.build(prefix, name, RWLOCK)


@dataclass(frozen=True)
class ReadWriteLockInfo:
    """A snapshot of one read/write lock: ``readers`` holding a read share now, ``writer``
    (someone holds the write lock), ``waiters`` queued (readers and writers), ``fence`` (the
    last fencing token issued), the seconds left on each hold's lease (``leases``), and who
    holds each (``held_by``: host, pid, thread or task, since when; in the order of
    ``leases``)."""

    name: str | bytes
    readers: int
    writer: bool
    waiters: int
    fence: int
    leases: tuple[float, ...]
    held_by: tuple[HolderInfo, ...] = ()


def rwlock_info(snapshot: Snapshot, name: str | bytes) -> ReadWriteLockInfo:
    """The :class:`ReadWriteLockInfo` of a snapshot of the lock's resource."""
    writers = sum(1 for h in snapshot.holders if h.units >= EVERYTHING)
    return ReadWriteLockInfo(
        name=name,
        readers=len(snapshot.holders) - writers,
        writer=writers > 0,
        waiters=snapshot.waiters,
        fence=snapshot.fence,
        leases=tuple(h.remaining for h in snapshot.holders),
        held_by=tuple(h.info() for h in snapshot.holders),
    )
