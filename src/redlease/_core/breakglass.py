"""Break-glass release, the pure part: its scripts, the argument checks, the reply decoding.

An operator removes a holding that will not go away (a holder hung on a lease renewed by a
live watchdog, a process stuck on I/O): ``Lock.force_release(client, name)``, the same for a
Semaphore's permits, a ReadWriteLock's holds and an Election's term, and ``redlease release
NAME --force``. One script per layout (``lua/force_release.lua`` for a lock,
``lua/shared_force_release.lua`` for the shared resources) removes the holding, moves the
fencing counter on (so every fence the evicted holder has is below it, and below the next
holder's) and passes the lock or units on to the waiters, as a release does. The evicted
holder learns it at its next renewal (its watchdog calls ``on_lost``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from . import holder
from .holder import HolderInfo
from .scripts import load

__all__ = [
    "FORCE_RELEASE",
    "SHARED_FORCE_RELEASE",
    "ForceReleased",
    "decode",
    "lock_args",
    "token",
]

FORCE_RELEASE = load("force_release", prelude=("common_lib", "lock_lib"))
SHARED_FORCE_RELEASE = load("shared_force_release", prelude=("common_lib", "shared_lib"))


@dataclass(frozen=True)
class ForceReleased:
    """What a break-glass release did: ``removed``, who held it and was evicted (empty: it
    was free, or not held with the token asked for: nothing was changed); ``fence``, the
    fencing counter now (moved on when something was removed: the evicted holders' fences
    are all below it, and the next holder's is above it)."""

    name: str | bytes
    removed: tuple[HolderInfo, ...]
    fence: int


def token(value: Any) -> bytes:
    """The ``token`` argument: ``None`` (whoever holds it) or the start of a holder's token
    (str, bytes), as ``inspect()`` shows it in ``HolderInfo.token`` (or the whole token): it
    names the holders whose token starts with it, so it must be at least as long as shown."""
    if value is None:
        return b""
    if isinstance(value, str):
        value = value.encode()
    if not isinstance(value, bytes):
        raise TypeError(f"token must be a str, bytes or None, got {type(value).__name__}")
    if len(value) < holder.SHOWN_HEX or any(c <= 32 for c in value):
        raise ValueError(
            "token must be a holder's token as inspect() shows it (at least "
            f"{holder.SHOWN_HEX} characters, no white space), got {value!r}"
        )
    return value


def lock_args(*, window_ms: int, channels: bytes, token: bytes) -> list[Any]:
    """force_release.lua's ARGV (KEYS: ``LockKeys.in_order()``): grant the lock to the queue
    head for ``window_ms``; ``token`` (``b""``: whoever holds it) the holding to remove."""
    return [window_ms, channels, token]


def decode(raw: Any, name: str | bytes, *, shared: bool) -> ForceReleased:
    """Decode force_release.lua's ``{token, fence}`` or shared_force_release.lua's
    ``{fence, token, ...}``; the removed holders' ``since`` is unknown here (``None``)."""
    try:
        if shared:
            fence, tokens = int(raw[0]), list(raw[1:])
        else:
            fence, tokens = int(raw[1]), [raw[0]] if raw[0] else []
        removed = tuple(holder.decode(t, 0) for t in tokens)
    except (TypeError, ValueError, IndexError) as exc:
        script = "shared_force_release.lua" if shared else "force_release.lua"
        raise ValueError(f"unexpected reply from {script}: {raw!r}") from exc
    return ForceReleased(name, removed, fence)
