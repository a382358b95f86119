"""Who waits for which lock in this process, and when each waiter should try again.

All waiters of one client share one pub/sub connection (the hub). The hub feeds every message
it reads into a :class:`WaiterTable`, which answers which waiters to wake. A waiter asks
:meth:`WaiterTable.plan` what to do next: try the lock now, give up, or sleep for how long.

Messages on a lock's channel (published by the lock scripts, see ``lua/lock_lib.lua``):

========================  =========================================================
``F``                     free, nobody queued: wake the first local waiter
``H<token> <window ms>``  free, reserved for ``token``: wake that waiter if it is ours,
                          else remember the reservation, so that the first local waiter
                          tries again (skipping a dead head) if it is not claimed in time
``T<lease ms>``           the reserved waiter took it: its lease ends in ``lease ms``
========================  =========================================================

Only the first local waiter of a channel keeps the timers (when the known lease runs out; when
a reservation for another process' waiter lapses): one retry per process, not one per waiter,
so a blocked waiter costs Redis no commands while the lock is held and released normally.
A lost message costs at most the remaining lease, never a hang.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

__all__ = ["Action", "Waiter", "WaiterTable"]

SLACK = 0.002
"""Seconds added to a timer that races the server's own deadline, so the retry lands after it."""


class Action(Enum):
    """What a waiter should do next."""

    ATTEMPT = "attempt"
    GIVE_UP = "give up"
    WAIT = "wait"


@dataclass(eq=False)
class Waiter:
    """One blocked acquire. ``event`` is the shell's Event; the table never touches it."""

    channel: bytes
    token: bytes
    event: Any
    woken: bool = False


@dataclass
class _Channel:
    waiters: dict[bytes, Waiter] = field(default_factory=dict)  # FIFO by insertion
    confirmed: bool = False
    retry_at: float | None = None  # when the lease we were last told about runs out
    reserved_until: float | None = None  # a reservation for another process' waiter lapses
    idle_since: float | None = None

    def first(self) -> Waiter | None:
        return next(iter(self.waiters.values()), None)


class WaiterTable:
    """The waiters of one hub, by channel. Not thread-safe: the shell guards it."""

    def __init__(self) -> None:
        self._channels: dict[bytes, _Channel] = {}

    # -- membership -------------------------------------------------------------------------
    def add(self, channel: bytes, token: bytes, event: Any) -> tuple[Waiter, bool]:
        """Register a waiter; returns it and whether the channel must be subscribed to."""
        state = self._channels.get(channel)
        fresh = state is None
        if state is None:
            state = self._channels[channel] = _Channel()
        state.idle_since = None
        waiter = Waiter(channel, token, event)
        state.waiters[token] = waiter
        return waiter, fresh

    def remove(self, waiter: Waiter, now: float) -> list[Waiter]:
        """Unregister a waiter; returns waiters to signal (a wake it did not use is passed on)."""
        state = self._channels.get(waiter.channel)
        if state is None or state.waiters.pop(waiter.token, None) is None:
            return []
        if not state.waiters:
            state.idle_since = now
            return []
        nxt = state.first()
        assert nxt is not None
        if waiter.woken:
            nxt.woken = True
        return [nxt]  # woken, or nudged to take over the channel's timers

    def confirmed(self, channel: bytes) -> bool:
        """Whether the subscription to ``channel`` is known to be active."""
        state = self._channels.get(channel)
        return state is not None and state.confirmed

    def channels(self) -> list[bytes]:
        return list(self._channels)

    def idle(self, now: float, linger: float) -> list[bytes]:
        """Forget channels without waiters for ``linger`` seconds; returns them (to unsubscribe)."""
        gone = [
            c
            for c, s in self._channels.items()
            if not s.waiters and s.idle_since is not None and now - s.idle_since >= linger
        ]
        for c in gone:
            del self._channels[c]
        return gone

    def empty(self) -> bool:
        return not self._channels

    # -- what the hub reads -----------------------------------------------------------------
    def on_subscribed(self, channel: bytes) -> list[Waiter]:
        state = self._channels.get(channel)
        if state is None:
            return []
        state.confirmed = True
        return list(state.waiters.values())

    def on_unsubscribed(self, channel: bytes) -> bool:
        """A subscription ended; returns True if waiters still need it (subscribe again)."""
        state = self._channels.get(channel)
        if state is None:
            return False
        state.confirmed = False
        return bool(state.waiters)

    def on_message(self, channel: bytes, data: bytes, now: float) -> list[Waiter]:
        """Apply one message; returns the waiters to signal."""
        state = self._channels.get(channel)
        if state is None or not data:
            return []
        first = state.first()
        kind, body = data[:1], data[1:]
        if kind == b"F":
            state.retry_at = state.reserved_until = None
            if first is not None:
                first.woken = True
                return [first]
        elif kind == b"H":
            token, _, window = body.partition(b" ")
            chosen = state.waiters.get(token)
            if chosen is not None:
                chosen.woken = True
                state.reserved_until = None
                return [chosen]
            state.reserved_until = now + _ms(window) + SLACK
            return [first] if first is not None else []
        elif kind == b"T":
            state.reserved_until = None
            state.retry_at = now + _ms(body) + SLACK
            return [first] if first is not None else []
        return []

    def on_disconnect(self) -> list[Waiter]:
        """The pub/sub connection broke: messages may be lost, so every waiter tries again."""
        woken: list[Waiter] = []
        for state in self._channels.values():
            state.confirmed = False
            for waiter in state.waiters.values():
                waiter.woken = True
                woken.append(waiter)
        return woken

    # -- what a waiter learns from its own attempt ------------------------------------------
    def refused(self, waiter: Waiter, status_held: bool, ms: int, now: float) -> None:
        """Record a refused attempt: held with ``ms`` left, or reserved for ``ms`` more."""
        state = self._channels.get(waiter.channel)
        if state is None:
            return
        if status_held:
            state.retry_at = now + ms / 1000 + SLACK if ms >= 0 else None
        else:
            state.reserved_until = now + ms / 1000 + SLACK

    def plan(
        self, waiter: Waiter, deadline: float | None, now: float, fallback: float
    ) -> tuple[Action, float | None]:
        """Next step of ``waiter``: try now, give up, or wait (seconds, ``None`` = until woken).

        ``fallback`` bounds a wait when no lease end is known (a key set without expiry).
        """
        state = self._channels.get(waiter.channel)
        if waiter.woken:
            waiter.woken = False
            return Action.ATTEMPT, None
        if deadline is not None and now >= deadline:
            return Action.GIVE_UP, None
        timers = [] if deadline is None else [deadline]
        if state is not None and state.first() is waiter:
            for attr in ("retry_at", "reserved_until"):
                at = getattr(state, attr)
                if at is not None and at <= now:
                    setattr(state, attr, None)
                    return Action.ATTEMPT, None
                if at is not None:
                    timers.append(at)
            if state.retry_at is None and state.reserved_until is None:
                timers.append(now + fallback)
        return Action.WAIT, (min(timers) - now if timers else None)


def _ms(raw: bytes) -> float:
    try:
        return int(raw) / 1000
    except ValueError:
        return 0.0
