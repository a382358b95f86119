"""The mutex's pure part: its keys, its scripts, and the decoding of their replies.

Four keys per lock name, all in one Redis Cluster slot (see :mod:`redlease._core.keys`)::

    <prefix>:{<name>}:lock       STRING  the holder's token, PX = lease. Existence IS the lock.
    <prefix>:{<name>}:fence      STRING  fencing counter, never expires, never reset
    <prefix>:{<name>}:queue      ZSET    waiting tokens in FIFO order
    <prefix>:{<name>}:handoff    STRING  reservation of the free lock for the queue head

The scripts (``lua/*.lua``, contracts in their headers) are one per transition: acquire (one
script per mode), release, leave (a waiter gives up), claim (a waiter granted the lock takes
up its lease), extend, renew (the watchdog's batch), inspect, and fence (Redlock writes a
merged fence back).
:class:`~redlease.Lock` and :class:`~redlease.Redlock` share them; the hand-off ``mode`` says
how a release passes the lock on (``lua/lock_lib.lua``), and which acquire script takes it:

* :data:`FAIR` (``Lock``): the release grants it to the queue head directly;
* :data:`BARGING` (``Lock(fair=False)``): the release frees it and wakes the head, and anyone
  may take it; a head kept waiting its turn (at most :data:`BARGE_MS`, shorter when many wait:
  :data:`ROTATION_MS`) is granted it at the next release;
* :data:`RESERVING` (``Redlock``): the release reserves it for the head, which takes it (N
  servers must agree on one holder, so no server may grant it on its own).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ForeignData
from . import holder, keys
from .holder import HolderInfo
from .scripts import load

__all__ = [
    "ACQUIRE",
    "ACQUIRED",
    "ACQUIRE_BARGING",
    "ACQUIRE_FAIR",
    "ACQUIRE_RESERVING",
    "BARGE_MS",
    "BARGING",
    "CLAIM",
    "EXTEND",
    "FAIR",
    "FENCE",
    "FOREIGN",
    "HELD",
    "INSPECT",
    "LEAVE",
    "RELEASE",
    "RENEW",
    "RESERVED",
    "RESERVING",
    "ROTATION_MS",
    "LockInfo",
    "LockKeys",
    "Reply",
    "acquire_args",
    "acquire_reserving_args",
    "claim_args",
    "decode_acquire",
    "decode_inspect",
    "leave_args",
    "release_args",
]

_LOCK_LIB = ("common_lib", "lock_lib")
_ACQUIRE_LIB = (*_LOCK_LIB, "acquire_lib")
ACQUIRE_FAIR = load("acquire_fair", prelude=_ACQUIRE_LIB)
ACQUIRE_BARGING = load("acquire_barging", prelude=_ACQUIRE_LIB)
ACQUIRE_RESERVING = load("acquire_reserving", prelude=_ACQUIRE_LIB)
RELEASE = load("release", prelude=_LOCK_LIB)
LEAVE = load("leave", prelude=_LOCK_LIB)
CLAIM = load("claim", prelude=_LOCK_LIB)
EXTEND = load("extend")
RENEW = load("renew")
INSPECT = load("inspect")
FENCE = load("fence")

ACQUIRED, HELD, RESERVED = 1, 0, 2
"""Status codes of the acquire scripts: taken / held by another (ms = its pttl) /
reserved (ms left)."""
FAIR, BARGING, RESERVING = b"G", b"B", b"R"
"""Hand-off modes of release.lua and leave.lua (see above); each has its acquire script."""
ACQUIRE = {FAIR: ACQUIRE_FAIR, BARGING: ACQUIRE_BARGING, RESERVING: ACQUIRE_RESERVING}
"""The acquire script of each hand-off mode."""
BARGE_MS = 10
"""Barging mode: the longest a waiter at the head of the queue lets others take the lock
before a release grants it the lock (ms): long enough that a process that releases and
re-takes the lock at once keeps it for a dozen or more acquisitions (that is where the
throughput comes from), short enough that nobody waits long. See :data:`ROTATION_MS`."""
ROTATION_MS = 150
"""Barging: the queue's heads share this much time (ms) as turns of 1..BARGE_MS each, so a
crowd of any size turns over in about ROTATION_MS plus its hand-offs."""
FOREIGN = -3
"""inspect.lua's status for a key holding data redlease did not write."""


# The scripts' ARGV, built by name: the shells (Lock, Redlock) never order or index it. Every
# script that takes a lock's four keys takes them as ``LockKeys.in_order()``; claim.lua takes
# the lock key alone.
def acquire_args(
    *, token: bytes, ttl_ms: int, join: bool, window_ms: int, channels: bytes
) -> list[Any]:
    """acquire_fair.lua and acquire_barging.lua: take the lock for ``ttl_ms`` with ``token``;
    ``join``: if refused, queue (the caller listens on ``channels``)."""
    return [token, ttl_ms, int(join), window_ms, channels]


def acquire_reserving_args(
    *,
    token: bytes,
    ttl_ms: int,
    join: bool,
    window_ms: int,
    channels: bytes,
    score: str,
    tell: bool,
) -> list[Any]:
    """acquire_reserving.lua: as :func:`acquire_args`, queued at ``score`` (``""``: the
    server's time); ``tell``: tell the next waiter that the lock was taken."""
    return [token, ttl_ms, int(join), window_ms, channels, score, _flag(tell)]


def release_args(
    *,
    token: bytes,
    window_ms: int,
    channels: bytes,
    mode: bytes,
    tell: bool = True,
    requeue: str = "",
    lease_ms: int = 0,
) -> list[Any]:
    """release.lua: release ``token``'s hold and pass the lock on to the queue head (who has
    ``window_ms`` to take or claim it); ``requeue``: the token goes on waiting (Redlock);
    ``lease_ms`` (fair): the lease a head that joined within the window is granted on."""
    return [*_pass_on(token, window_ms, channels, mode, tell), requeue, lease_ms]


def leave_args(
    *, token: bytes, window_ms: int, channels: bytes, mode: bytes, tell: bool = True
) -> list[Any]:
    """leave.lua: ``token`` leaves the queue, passing on a turn it had (as release.lua)."""
    return _pass_on(token, window_ms, channels, mode, tell)


def claim_args(*, token: bytes, ttl_ms: int) -> list[Any]:
    """claim.lua: the grantee ``token`` takes up its own lease of ``ttl_ms``."""
    return [token, ttl_ms]


def _pass_on(token: bytes, window_ms: int, channels: bytes, mode: bytes, tell: bool) -> list[Any]:
    """ARGV[1..7] shared by release.lua and leave.lua (barging's turns unused in mode R)."""
    barge, rotation = (0, 0) if mode == RESERVING else (BARGE_MS, ROTATION_MS)
    return [token, window_ms, channels, mode, barge, _flag(tell), rotation]


def _flag(on: bool) -> str:
    return "1" if on else "0"


@dataclass(frozen=True)
class LockKeys:
    """The Redis keys of one lock name."""

    lock: bytes
    fence: bytes
    queue: bytes
    handoff: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> LockKeys:
        """Keys for ``name`` (already validated and encoded) under ``prefix``."""
        return cls(*keys.tagged(prefix, name, "lock", "fence", "queue", "handoff"))

    def in_order(self) -> list[bytes]:
        """All four keys, in the order every lock script that takes them takes them."""
        return [self.lock, self.fence, self.queue, self.handoff]


@dataclass(frozen=True)
class Reply:
    """An acquire script's reply: ``status`` and ``value`` (the fence when acquired, else ms); a
    refusal also carries the server's time in ms (``server_ms``, else ``None``)."""

    status: int
    value: int
    server_ms: int | None = None

    @property
    def acquired(self) -> bool:
        """Whether the lock was taken."""
        return self.status == ACQUIRED


def decode_acquire(raw: Any) -> Reply:
    """Decode ``{status, value}`` from an acquire script, refusing anything else."""
    try:
        status, value = int(raw[0]), int(raw[1])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from an acquire script: {raw!r}") from exc
    if status not in (ACQUIRED, HELD, RESERVED):
        raise ValueError(f"unexpected status from an acquire script: {raw!r}")
    return Reply(status, value, int(raw[2]) if len(raw) > 2 else None)


@dataclass(frozen=True)
class LockInfo:
    """A snapshot of one lock, read atomically by ``Lock.inspect()``.

    ``held``: someone holds it now; ``mine``: this handle's current acquisition does;
    ``remaining``: seconds left on the lease (``None`` when free, or for a key set without
    expiry); ``fence``: the last fencing token issued (the next holder gets a larger one; 0:
    never acquired); ``waiters``: tokens queued for it (a dead one counts until skipped);
    ``held_by``: who holds it (host, pid, thread or task, since when; ``None`` when free);
    ``servers``: how many servers report that holder (a ``Lock``: 1 when held; a
    ``Redlock``: of its N servers, at least a majority when ``held``).
    """

    name: str | bytes
    held: bool
    mine: bool
    remaining: float | None
    fence: int
    waiters: int
    held_by: HolderInfo | None = None
    servers: int = 0


def decode_inspect(raw: Any, name: str | bytes, keys: LockKeys) -> LockInfo:
    """Decode ``{pttl, mine, fence, waiters, holder}`` from inspect.lua.

    Raises :class:`~redlease.ForeignData` naming the key when inspect.lua found one holding
    data redlease did not write (``{-3, i}``).
    """
    try:
        if len(raw) == 2 and int(raw[0]) == FOREIGN:
            key = keys.in_order()[int(raw[1]) - 1]
            raise ForeignData(
                f"key {key.decode(errors='replace')} of lock {name!r} holds data redlease "
                "did not write",
                name=name,
                key=key,
            )
        pttl, mine, fence, waiters = (int(x) for x in raw[:4])
        token = raw[4] if len(raw) > 4 else b""
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from inspect.lua: {raw!r}") from exc
    held = pttl != -2
    return LockInfo(
        name=name,
        held=held,
        mine=bool(mine),
        remaining=pttl / 1000 if pttl >= 0 else None,
        fence=fence,
        waiters=waiters,
        held_by=holder.decode(token, fence) if held and token else None,
        servers=int(held),
    )
