"""Who waits in this process, and when each waiter should try again.

Every process has one pub/sub channel of its own, ``redlease:waiters:<process id>``, and every
token it creates starts with that id (``<process id>.<random>``). The lock scripts read the id
off a queued token and tell exactly that process what concerns it (``lua/lock_lib.lua``):

========================  =========================================================
``H<token> <window ms>``  the lock is free and reserved for ``token``: take it now
``N<token> <window ms>``  the waiter ahead of ``token`` has ``window ms`` to take it;
                          if it has not by then, try (the script skips a dead head)
``T<token> <lease ms>``   the waiter ahead took it: the lease ends in ``lease ms``
========================  =========================================================

So a hand-off wakes one thread in the next holder's process and touches one other process;
nobody else hears of it. The hub (one per client and process) subscribes once, whatever the
number of locks waited on, and feeds each message into a :class:`WaiterTable`, which says whom
to wake. A waiter asks :meth:`WaiterTable.plan` what to do: try now, give up, or sleep. A lost
message costs at most the remaining lease, never a hang: every waiter also retries when the
lease it was last told about runs out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

__all__ = ["WAITERS", "Action", "Outcome", "Waiter", "WaiterTable", "next_step", "waiters_channel"]

WAITERS = b"redlease:waiters:"
"""The prefix of every process' waiters channel; the scripts append the process id."""


def waiters_channel(process: bytes) -> bytes:
    """The channel on which the lock scripts tell ``process`` about its waiters."""
    return WAITERS + process


SLACK = 0.002
"""Seconds added to a timer that races the server's own deadline, so the retry lands after it."""


class Action(Enum):
    """What a waiter should do next."""

    ATTEMPT = "attempt"
    GIVE_UP = "give up"
    WAIT = "wait"


@dataclass(frozen=True)
class Outcome:
    """What one attempt of a blocked acquire learned, on each of the servers it asked.

    ``result`` is what the acquire returns when the attempt succeeded (``None``: it did not).
    Otherwise ``refusals`` has ``(server, held, ms)`` per server that refused: held by another
    with ``ms`` of lease left (``held``), or reserved for a waiter ahead for ``ms`` more.
    ``answered``: the servers that answered (their wake-ups are worth listening for);
    ``queued``: the servers whose queue may hold the token after this attempt (to be left if
    the wait ends without the lock); ``split``: some servers granted but not enough of them
    (Redlock), so the next try backs off at random.
    """

    result: Any = None
    refusals: tuple[tuple[int, bool, int], ...] = ()
    answered: tuple[int, ...] = ()
    queued: tuple[int, ...] = ()
    split: bool = False


@dataclass(eq=False)
class Waiter:
    """One blocked acquire. ``event`` is the shell's Event; the table never touches it."""

    token: bytes
    event: Any
    woken: bool = False
    retry_at: float | None = None  # the lease we were told about runs out
    check_at: float | None = None  # the reservation of the waiter ahead of us lapses


class WaiterTable:
    """The waiters of one hub, by token. Not thread-safe: the shell guards it."""

    def __init__(self) -> None:
        self._waiters: dict[bytes, Waiter] = {}
        self.confirmed = False  # the hub's subscription is known to be active
        self.idle_since: float | None = 0.0

    def add(self, token: bytes, event: Any) -> Waiter:
        """Register a waiter."""
        waiter = self._waiters[token] = Waiter(token, event)
        self.idle_since = None
        return waiter

    def remove(self, waiter: Waiter, now: float) -> None:
        """Unregister a waiter (its turn, if any, is passed on by leave.lua in Redis)."""
        if self._waiters.pop(waiter.token, None) is not None and not self._waiters:
            self.idle_since = now

    def waiters(self) -> list[Waiter]:
        """Every registered waiter."""
        return list(self._waiters.values())

    def idle(self, now: float, linger: float) -> bool:
        """True when there have been no waiters for ``linger`` seconds."""
        return self.idle_since is not None and now - self.idle_since >= linger

    # -- what the hub reads -----------------------------------------------------------------
    def on_message(self, data: bytes, now: float) -> list[Waiter]:
        """Apply one message; returns the waiters to wake."""
        kind, body = data[:1], data[1:]
        token, _, ms = body.partition(b" ")
        waiter = self._waiters.get(token)
        if waiter is None:
            return []
        seconds = _seconds(ms)
        if kind == b"H":
            waiter.woken, waiter.check_at = True, None
            return [waiter]
        if kind == b"N":
            waiter.check_at = now + seconds + SLACK
        elif kind == b"T":
            waiter.check_at = None
            waiter.retry_at = now + seconds + SLACK
        return []

    def next_check(self) -> float | None:
        """When the hub must next wake a waiter whose predecessor's turn lapses."""
        return min((w.check_at for w in self._waiters.values() if w.check_at), default=None)

    def due(self, now: float) -> list[Waiter]:
        """Waiters whose predecessor's turn has lapsed: they should try now."""
        woken = []
        for waiter in self._waiters.values():
            if waiter.check_at is not None and waiter.check_at <= now:
                waiter.woken, waiter.check_at = True, None
                woken.append(waiter)
        return woken

    def on_disconnect(self) -> list[Waiter]:
        """The pub/sub connection broke: messages may be lost, so every waiter tries again."""
        self.confirmed = False
        for waiter in self._waiters.values():
            waiter.woken = True
        return list(self._waiters.values())

    # -- what a waiter learns from its own attempt ------------------------------------------
    @staticmethod
    def refused(waiter: Waiter, held: bool, ms: int, now: float) -> None:
        """Record a refused attempt: held with ``ms`` left, or reserved for ``ms`` more."""
        if held:
            waiter.retry_at = now + ms / 1000 + SLACK if ms >= 0 else None
        else:
            waiter.check_at = now + ms / 1000 + SLACK

    @staticmethod
    def plan(
        waiter: Waiter, deadline: float | None, now: float, fallback: float
    ) -> tuple[Action, float | None]:
        """Next step of ``waiter``: try now, give up, or wait (seconds, ``None`` = until woken).

        ``fallback`` bounds a wait when no lease end is known (a key set without expiry).
        """
        if waiter.woken:
            waiter.woken = False
            return Action.ATTEMPT, None
        if deadline is not None and now >= deadline:
            return Action.GIVE_UP, None
        if waiter.retry_at is None:
            waiter.retry_at = now + fallback
        timers = [t for t in (deadline, waiter.retry_at, waiter.check_at) if t is not None]
        first = min(timers)
        if first <= now:  # a lease or a reservation ran out: the state has changed
            waiter.retry_at = waiter.check_at = None
            return Action.ATTEMPT, None
        return Action.WAIT, first - now


def _seconds(raw: bytes) -> float:
    try:
        return int(raw) / 1000
    except ValueError:
        return 0.0


def next_step(plans: list[tuple[Action, float | None]]) -> tuple[Action, float | None]:
    """Merge the plans of one acquire's waiters on N servers (one per server's hub).

    Attempt as soon as any server says so; give up when every one does; else wait for the
    earliest timer (``None``: until woken).
    """
    if any(action is Action.ATTEMPT for action, _ in plans):
        return Action.ATTEMPT, None
    if all(action is Action.GIVE_UP for action, _ in plans):
        return Action.GIVE_UP, None
    waits = [wait for action, wait in plans if action is Action.WAIT and wait is not None]
    return Action.WAIT, min(waits) if waits else None
