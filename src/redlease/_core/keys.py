"""Key layout: every key of one primitive starts with ``<prefix>:{<name>}:``.

The braces are Redis Cluster's hash tag: all keys of one lock, inventory or other primitive
fall in one slot, so that every script touches one slot (a cluster requires it). Each
primitive's core module names its own keys on top of :func:`tagged`, in one function or
``build`` per primitive; for prefix ``redlease`` and the name ``orders:42``::

    Lock, RLock, Redlock  redlease:{orders:42}:lock  :fence  :queue  :handoff  (_core/lock.py)
                          :adopted  (a token spent by adopt(): _core/handover.py)
    Semaphore             redlease:{orders:42}:semaphore:holders  ...  (_core/semaphore.py)
    ReadWriteLock         redlease:{orders:42}:rwlock:holders  ...     (_core/rwlock.py)
    Election              redlease:{orders:42}:election:holders  ...   (_core/election.py)
    CountDownLatch        redlease:{orders:42}:count  :generation  :waiters  (_core/latch.py)
    FencedStore           redlease:{orders:42}:fenced  :fenced:meta    (_core/fencing.py)
    Inventory             redlease:{orders:42}:stock  :orders  ...     (_core/inventory.py)
    Once                  redlease:{orders:42}:once:run  :once:fence   (_core/once.py)

No two primitives of one name share a key: the suffixes after ``}:`` differ, and the shared
primitives (one layout, ``_core/shared.py``) put their kind first. Lock and RLock use the
same keys on purpose: they are one lock, and exclude each other.
"""

from __future__ import annotations

__all__ = ["base", "hash_tag", "tagged"]


def base(prefix: str, name: bytes) -> bytes:
    """``<prefix>:{<name>}:``, the start of every key of the primitive ``name``.

    ``prefix`` and ``name`` must be validated already (see :mod:`redlease._core.validate`).
    """
    return prefix.encode() + b":{" + name + b"}:"


def tagged(prefix: str, name: bytes, *suffixes: str) -> tuple[bytes, ...]:
    """The keys ``<prefix>:{<name>}:<suffix>`` for each suffix, in order."""
    start = base(prefix, name)
    return tuple(start + suffix.encode() for suffix in suffixes)


def hash_tag(key: bytes) -> bytes:
    """The part of ``key`` Redis Cluster hashes: between the first ``{`` and the next ``}``.

    The whole key when it has no such non-empty tag (Redis' own rule). A channel carrying the
    same tag falls in the same slot as the key: the lock scripts tell waiters on one.
    """
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key
