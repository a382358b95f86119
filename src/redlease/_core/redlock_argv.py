"""The ARGV Redlock sends to the lock scripts (acquire_reserving.lua, release.lua, leave.lua,
in reservation mode), built by name here so that no shell knows their positions.

A round over all N servers sends :attr:`Argv.told` to the first :func:`~.redlock.tellers`
of them and :attr:`Argv.quiet` to the rest: only the tellers publish waiters' wake-ups (see
``_core/redlock.py`` for why one message from them is enough).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .lock import RESERVING, acquire_reserving_args, leave_args, release_args
from .waiters import WAITERS

__all__ = ["MODE", "Argv", "acquire", "leave", "release", "requeue"]

MODE = RESERVING
"""The lock scripts' hand-off mode for Redlock: reservations (no server grants on its own)."""


@dataclass(frozen=True)
class Argv:
    """One script's ARGV for the servers that tell waiters and for the quiet ones."""

    told: list[Any]
    quiet: list[Any]


def acquire(*, token: bytes, ttl_ms: int, join: bool, window_ms: int, ticket: str) -> Argv:
    """acquire_reserving.lua: take the lock for ``ttl_ms`` with ``token``; ``join``: if
    refused, queue under ``ticket`` (the same on every server, so all queues agree); a teller
    tells the next waiter that the lock was taken (T)."""

    def argv(tell: bool) -> list[Any]:
        return acquire_reserving_args(
            token=token,
            ttl_ms=ttl_ms,
            join=join,
            window_ms=window_ms,
            channels=WAITERS,
            score=ticket,
            tell=tell,
        )

    return Argv(argv(True), argv(False))


def release(*, token: bytes, window_ms: int, requeue: str = "") -> Argv:
    """release.lua: release ``token``'s hold and reserve the lock for the queue head for
    ``window_ms``; ``requeue`` (see :func:`requeue`): the token goes on waiting."""

    def argv(tell: bool) -> list[Any]:
        return release_args(
            token=token,
            window_ms=window_ms,
            channels=WAITERS,
            mode=MODE,
            tell=tell,
            requeue=requeue,
        )

    return Argv(argv(True), argv(False))


def leave(*, token: bytes, window_ms: int) -> Argv:
    """leave.lua: ``token`` leaves the queue (passing on a reservation it had)."""

    def argv(tell: bool) -> list[Any]:
        return leave_args(token=token, window_ms=window_ms, channels=WAITERS, mode=MODE, tell=tell)

    return Argv(argv(True), argv(False))


def requeue(ticket: str, ttl_ms: int) -> str:
    """release.lua's ``requeue``: the releasing token is queued under ``ticket`` (with a
    lease of ``ttl_ms``) first: it undoes a round it did not win and goes on waiting."""
    return f"{ticket} {ttl_ms}"
