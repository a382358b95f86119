"""One holding of a lease (a lock, a permit, a share, a term), and the tokens that name it.

A :class:`Holding` is the process-local record of a lease held in Redis: its token, fencing
token, owner (thread or task), reentrancy count and local estimate of when its lease ends, and
how the watchdog renews it (a batch script, and the target that runs it: one server, or a
Redlock's servers). The watchdog renews holdings; handles point at them. Nothing here talks to
Redis.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from .holder import identity
from .scripts import Script

__all__ = ["Holding", "new_token", "pid", "process_id"]

_pid = os.getpid()
_process: tuple[int, bytes] = (0, b"")


def _forked() -> None:
    global _pid
    _pid = os.getpid()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_forked)


def pid() -> int:
    """This process' id: ``os.getpid()`` read once, and again in a forked child (the hot
    path asks often, and ``os.getpid()`` is a system call)."""
    return _pid


def process_id() -> bytes:
    """This process' random id (48 bits, hex): new in a forked child. Names its channel."""
    global _process
    if _process[0] != _pid:
        _process = (_pid, secrets.token_hex(6).encode())
    return _process[1]


def new_token(who: str = "") -> bytes:
    """A fresh token for one acquisition: ``<process id>.<128 random bits, hex>.<identity>``.

    The process id lets the lock scripts tell this process, and no other, that its turn came;
    the identity (host, pid and ``who``: the acquiring thread's or task's name) says who holds
    it, for ``inspect()`` (see :mod:`redlease._core.holder`).
    """
    return process_id() + b"." + secrets.token_hex(16).encode() + b"." + identity(_pid, who)


@dataclass(eq=False)
class Holding:
    """A lease this process holds in Redis: one token, one fence, one owner.

    ``owner`` is the thread or task that acquired (RLock re-entry and the self-deadlock check
    are per owner); ``holder`` is who may release or extend it (sync: that thread; asyncio: any
    task of its event loop) and ``pid`` the process that acquired: a forked child holds none
    of its parent's holdings.
    ``count`` is the reentrancy depth (always 1 for a plain :class:`~redlease.Lock`).
    ``expires_at`` is a conservative local estimate (monotonic clock) of when the lease ends:
    the time the last successful acquire/extend was *sent*, plus the lease.

    ``renew_script`` renews a batch of holdings of one kind: every such script takes one key
    per holding (``KEYS[i] = key``) and two arguments (``ARGV[2i-1] = token``, ``ARGV[2i] =``
    lease ms) and answers 1 (renewed) or 0 (lost) per holding. ``renew_target`` is the shell's
    object that runs it (hashable); the watchdog sends the due holdings that share both in one
    call.
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
    renewed: bool = False  # handed to a watchdog: the lease does not run out while held
    on_lost: Callable[[], object] | None = field(default=None, repr=False)
    renew_script: Script | None = field(default=None, repr=False)
    renew_target: Hashable = field(default=None, repr=False)
    # What logs and metrics call it (see redlease._observe): "lock", "redlock", ...; its name;
    # and when it was acquired (monotonic), for the hold time.
    primitive: str = ""
    name: str = ""
    acquired_at: float = 0.0
    holder: Hashable = None
    pid: int = field(default_factory=lambda: _pid)
    # A grant whose claim's reply was lost: if the claim landed, the lease runs until then on
    # the server (monotonic clock), so a renewal may wait that long for its reply.
    reach: float = 0.0

    @property
    def inherited(self) -> bool:
        """Acquired by the parent of this forked process: not this process' to act on."""
        return self.pid != _pid

    @property
    def active(self) -> bool:
        """Neither released nor known to be lost."""
        return not (self.lost or self.released)

    def ran_out(self, now: float) -> bool:
        """Whether the lease has surely run out at ``now`` (monotonic clock)."""
        return self.expires_at <= now

    def renew_by(self) -> float:
        """The latest a renewal of this holding is worth a reply: its lease end, or a lost
        claim's if that is later (monotonic clock)."""
        return max(self.expires_at, self.reach)

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
