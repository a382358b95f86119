"""The ARGV Redlock sends to the lock scripts (acquire.lua, release.lua, leave.lua, in
reservation mode), built by name here so that no shell knows their positions.

A round over all N servers sends :attr:`Argv.told` to the first :func:`~.redlock.tellers`
of them and :attr:`Argv.quiet` to the rest: only the tellers publish waiters' wake-ups (see
``_core/redlock.py`` for why one message from them is enough).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .waiters import WAITERS

__all__ = ["MODE", "Argv", "acquire", "leave", "release", "requeue"]

MODE = "R"
"""The lock scripts' hand-off mode for Redlock: reservations (no server grants on its own)."""
_TELL, _QUIET = "1", "0"  # ARGV ``tell``: publish the wake-up (or the T message), or not
_NO_BARGE = _NO_ROTATION = 0  # barging mode's ARGV, unused in reservation mode


@dataclass(frozen=True)
class Argv:
    """One script's ARGV for the servers that tell waiters and for the quiet ones."""

    told: list[Any]
    quiet: list[Any]


def acquire(*, token: bytes, ttl_ms: int, join: bool, window_ms: int, ticket: str) -> Argv:
    """acquire.lua: take the lock for ``ttl_ms`` with ``token``; ``join``: if refused, queue
    under ``ticket`` (the same on every server, so all queues agree); a teller tells the next
    waiter that the lock was taken (T)."""

    def argv(tell: str) -> list[Any]:
        return [token, ttl_ms, int(join), window_ms, WAITERS, ticket, MODE, tell]

    return Argv(argv(_TELL), argv(_QUIET))


def release(*, token: bytes, window_ms: int, requeue: str = "") -> Argv:
    """release.lua: release ``token``'s hold and reserve the lock for the queue head for
    ``window_ms``; ``requeue`` (see :func:`requeue`): the token goes on waiting."""

    def argv(tell: str) -> list[Any]:
        out: list[Any] = [token, window_ms, WAITERS, MODE, _NO_BARGE, tell]
        if requeue:
            out += [_NO_ROTATION, requeue]
        return out

    return Argv(argv(_TELL), argv(_QUIET))


def leave(*, token: bytes, window_ms: int) -> Argv:
    """leave.lua: ``token`` leaves the queue (passing on a reservation it had)."""

    def argv(tell: str) -> list[Any]:
        return [token, window_ms, WAITERS, MODE, _NO_BARGE, tell]

    return Argv(argv(_TELL), argv(_QUIET))


def requeue(ticket: str, ttl_ms: int) -> str:
    """release.lua's ``requeue``: the releasing token is queued under ``ticket`` (with a
    lease of ``ttl_ms``) first: it undoes a round it did not win and goes on waiting."""
    return f"{ticket} {ttl_ms}"
