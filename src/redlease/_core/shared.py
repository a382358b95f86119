"""A resource of N units shared by leased holders, with a FIFO queue: the pure part.

``Semaphore`` (one unit per permit), ``ReadWriteLock`` (a reader asks one unit, a writer all of
them) and ``Election`` (one unit) are each a thin layer over this. Eight keys per name, all in
one Redis Cluster slot (see ``lua/shared_lib.lua`` for what each holds), under the kind of
the primitive (``semaphore``, ``rwlock``, ``election``: :data:`SEMAPHORE`, ...), so that a
Lock, a Semaphore, a ReadWriteLock and an Election of one name never share a key::

    <prefix>:{<name>}:<kind>:holders   ZSET    holder token -> lease end (server ms)
    <prefix>:{<name>}:<kind>:units     HASH    token -> units held or asked for (absent: 1)
    <prefix>:{<name>}:<kind>:queue     ZSET    waiting tokens in FIFO order
    <prefix>:{<name>}:<kind>:granted   ZSET    waiters whose units are reserved -> deadline
    <prefix>:{<name>}:<kind>:fence     STRING  fencing counter, never expires, never reset
    <prefix>:{<name>}:<kind>:capacity  STRING  the stored capacity (Semaphore's permits)
    <prefix>:{<name>}:<kind>:payload   HASH    holder token -> "<fence> <value>" (value: Election's)
    <prefix>:{<name>}:<kind>:watchers  ZSET    tokens told whenever the holders change

A waiter is served when everyone ahead of it fits along with it; when units free up, every
waiter that now fits is woken at once (``H`` messages, :mod:`redlease._core.waiters`), the
first that does not is told when to check that they took their turn. Each holder's units are
a lease on the server's clock, renewed by the watchdog with ``shared_renew.lua`` (the one
renewal contract of :mod:`redlease._core.renewals`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import holder, keys
from .holder import HolderInfo
from .lock import Reply
from .lock import decode_acquire as decode_lock_acquire
from .scripts import load

__all__ = [
    "ACQUIRE",
    "ELECTION",
    "EVERYTHING",
    "INSPECT",
    "KINDS",
    "LEAVE",
    "RELEASE",
    "RENEW",
    "RWLOCK",
    "SEMAPHORE",
    "Acquired",
    "Holder",
    "SharedKeys",
    "Snapshot",
    "as_bytes",
    "decode_acquire",
    "decode_inspect",
    "int_list",
]

_LIBS = ("common_lib", "shared_lib")
ACQUIRE = load("shared_acquire", prelude=_LIBS)
RELEASE = load("shared_release", prelude=_LIBS)
LEAVE = load("shared_leave", prelude=_LIBS)
RENEW = load("shared_renew", prelude=("common_lib",))
INSPECT = load("shared_inspect", prelude=_LIBS)

SEMAPHORE, RWLOCK, ELECTION = "semaphore", "rwlock", "election"
KINDS = (SEMAPHORE, RWLOCK, ELECTION)
"""The primitives built on a shared resource: the word after ``}:`` in each of their keys."""
_SUFFIXES = ("holders", "units", "queue", "granted", "fence", "capacity", "payload", "watchers")

EVERYTHING = 10**12
"""The capacity of a resource whose holders ask for one unit or for all of them (a writer).

Lua prints numbers with 14 significant digits when it stores them (HSET): 2**50 would come
back smaller than itself, and a writer would then leave room for a reader. 10**12 is exact."""


@dataclass(frozen=True)
class SharedKeys:
    """The Redis keys of one shared resource, in the order every shared script takes them."""

    holders: bytes
    units: bytes
    queue: bytes
    granted: bytes
    fence: bytes
    capacity: bytes
    payload: bytes
    watchers: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes, kind: str) -> SharedKeys:
        """Keys of the ``kind`` (one of :data:`KINDS`) named ``name`` (already validated and
        encoded) under ``prefix``: ``<prefix>:{<name>}:<kind>:<key>``."""
        if kind not in KINDS:
            raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
        return cls(*keys.tagged(prefix, name, *(f"{kind}:{suffix}" for suffix in _SUFFIXES)))

    def in_order(self) -> list[bytes]:
        """All eight keys, as KEYS[1..8] of the shared scripts."""
        return [
            self.holders,
            self.units,
            self.queue,
            self.granted,
            self.fence,
            self.capacity,
            self.payload,
            self.watchers,
        ]


@dataclass(frozen=True)
class Acquired:
    """shared_acquire.lua's reply: ``reply`` (status and value, as a lock's acquire script's) and
    ``capacity``, the capacity stored in Redis (``None`` when it is not stored)."""

    reply: Reply
    capacity: int | None


def decode_acquire(raw: Any) -> Acquired:
    """Decode ``{status, value}``, or ``{status, value, capacity}`` for a stored capacity."""
    reply = decode_lock_acquire(raw[:2] if isinstance(raw, list) else raw)
    try:
        capacity = int(raw[2]) if len(raw) > 2 else None
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from shared_acquire.lua: {raw!r}") from exc
    return Acquired(reply, capacity)


def int_list(raw: Any, script: str, n: int | None = None) -> list[int]:
    """A flat reply of integers (``n`` of them when given), refusing anything else."""
    try:
        values = [int(x) for x in raw]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from {script}: {raw!r}") from exc
    if n is not None and len(values) != n:
        raise ValueError(f"unexpected reply from {script}: {raw!r}")
    return values


@dataclass(frozen=True)
class Holder:
    """One live holder in a snapshot: its token, lease left (s), units and payload."""

    token: bytes
    remaining: float
    units: int
    payload: bytes

    def info(self) -> HolderInfo:
        """Who this holder is, and since when (its fence is kept in its payload)."""
        fence = self.payload.partition(b" ")[0]
        return holder.decode(self.token, int(fence) if fence.isdigit() else 0)


@dataclass(frozen=True)
class Snapshot:
    """What ``shared_inspect.lua`` read: capacity, units used, waiters, last fence, holders."""

    capacity: int
    used: int
    waiters: int
    fence: int
    mine: float | None  # lease left on the asked token (None: it holds nothing)
    holders: tuple[Holder, ...]


def decode_inspect(raw: Any, name: str | bytes, keys: SharedKeys) -> Snapshot:
    """Decode ``shared_inspect.lua``'s reply; :class:`~redlease.ForeignData` for foreign keys."""
    from ..errors import ForeignData

    try:
        if len(raw) == 2 and not isinstance(raw[0], list) and int(raw[0]) == -3:
            key = keys.in_order()[int(raw[1]) - 1]
            raise ForeignData(
                f"key {key.decode(errors='replace')} of {name!r} holds data redlease did not write",
                name=name,
                key=key,
            )
        cap, used, waiters, fence, mine = int_list(raw[0], "shared_inspect.lua", 5)
        holders = tuple(
            Holder(as_bytes(t), int(ms) / 1000, int(u), as_bytes(p)) for t, ms, u, p in raw[1:]
        )
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from shared_inspect.lua: {raw!r}") from exc
    return Snapshot(cap, used, waiters, fence, None if mine == -2 else mine / 1000, holders)


def as_bytes(value: bytes | str) -> bytes:
    """A reply's string as bytes (a client may decode responses)."""
    return value.encode() if isinstance(value, str) else bytes(value)
