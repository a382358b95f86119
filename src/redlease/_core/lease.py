"""One acquisition of a lock, and the decoding of the lock scripts' replies.

A :class:`Holding` is the process-local record of a lock held in Redis: its token, fencing token,
owner (thread or task), reentrancy count and local estimate of when its lease ends. The watchdog
renews holdings; handles point at them. Nothing here talks to Redis.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "ACQUIRED",
    "HELD",
    "RESERVED",
    "Holding",
    "Reply",
    "decode_acquire",
    "new_token",
    "process_id",
]

ACQUIRED, HELD, RESERVED = 1, 0, 2
"""Status codes of acquire.lua: taken / held by another (ms = its pttl) / reserved (ms left)."""


_process: tuple[int, bytes] = (0, b"")


def process_id() -> bytes:
    """This process' random id (48 bits, hex): new in a forked child. Names its channel."""
    global _process
    pid = os.getpid()
    if _process[0] != pid:
        _process = (pid, secrets.token_hex(6).encode())
    return _process[1]


def new_token() -> bytes:
    """A fresh token for one acquisition: ``<process id>.<128 random bits, hex>``.

    The process id lets the lock scripts tell this process, and no other, that its turn came.
    """
    return process_id() + b"." + secrets.token_hex(16).encode()


@dataclass(frozen=True)
class Reply:
    """acquire.lua's reply: ``status`` and ``value`` (the fence when acquired, else ms)."""

    status: int
    value: int

    @property
    def acquired(self) -> bool:
        return self.status == ACQUIRED


def decode_acquire(raw: Any) -> Reply:
    """Decode ``{status, value}`` from acquire.lua, refusing anything else."""
    try:
        status, value = int(raw[0]), int(raw[1])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from acquire.lua: {raw!r}") from exc
    if status not in (ACQUIRED, HELD, RESERVED):
        raise ValueError(f"unexpected status from acquire.lua: {raw!r}")
    return Reply(status, value)


@dataclass(eq=False)
class Holding:
    """A lock this process holds in Redis: one token, one fence, one owner.

    ``count`` is the reentrancy depth (always 1 for a plain :class:`~redlease.Lock`).
    ``expires_at`` is a conservative local estimate (monotonic clock) of when the lease ends:
    the time the last successful acquire/extend was *sent*, plus the lease.
    """

    key: bytes
    token: bytes
    fence: int
    owner: Hashable
    ttl_ms: int
    expires_at: float
    reentrant: bool = False
    drift_ms: float = 0.0  # Redlock: the clock drift allowance taken off every lease
    count: int = 1
    lost: bool = False
    released: bool = False
    on_lost: Callable[[], object] | None = field(default=None, repr=False)

    @property
    def active(self) -> bool:
        """Neither released nor known to be lost."""
        return not (self.lost or self.released)

    def extended(self, sent_at: float, ttl_ms: int) -> None:
        """Record a successful extend/renew that was sent at ``sent_at``."""
        self.ttl_ms = ttl_ms
        self.expires_at = sent_at + (ttl_ms - self.drift_ms) / 1000

    def mark_lost(self) -> Callable[[], object] | None:
        """Mark the holding lost; returns the callback to run, once, outside any lock."""
        if not self.active:
            return None
        self.lost = True
        return self.on_lost
