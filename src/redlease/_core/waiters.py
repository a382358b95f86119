"""Who waits in this process, and when each waiter should try again.

Every process has one pub/sub channel of its own, ``redlease:waiters:<process id>``, and every
token it creates starts with that id (``<process id>.<random>``). The lock scripts read the id
off a queued token and tell exactly that process what concerns it (``lua/common_lib.lua``):

==============================  ===================================================
``G<token> <fence> <ms> <now>`` the lock was *granted* to ``token`` (a fair Lock's
                                release hands it over directly): it holds it, with
                                ``fence``, on a lease of ``ms`` until it claims it;
                                ``now``: the server's clock (ms), to tell a fresh grant
                                from one read late (see :class:`ServerClock`)
``H<token> <window ms>``        the lock is free and reserved for ``token``: take it now
``F<token> <ms>``               the lock is free (barging mode): try now, and again in
                                ``ms`` (a release then grants it, if others took it)
``N<token> <window ms>``        the waiter ahead of ``token`` has ``window ms`` to take
                                or claim it; if it has not by then, try (the script
                                skips a dead head)
``T<token> <lease ms>``         the waiter ahead took it: the lease ends in ``lease ms``
==============================  ===================================================

So a hand-off wakes one thread in the next holder's process and touches one other process;
nobody else hears of it. A grant (``G``) needs no further round trip before ``acquire()``
returns: the hub that reads it hands it to the waiter's :class:`Grantee`, which builds the
result and sends the claim (its own lease); the hub wakes the waiter, then the reply is read. A
grant read late (the process was paused, or the message queued behind others) could have run
out already: then the waiter is woken only once the claim's reply says the lock is still its.

The hub (one per client and process) subscribes once, whatever the number of locks waited on,
and feeds each message into a :class:`WaiterTable`, which says whom to wake. A waiter asks
:meth:`WaiterTable.plan` what to do: try now, give up, or sleep. A lost message costs at most
the remaining lease, never a hang: every waiter also retries when the lease it was last told
about runs out.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any, Protocol

__all__ = [
    "WAITERS",
    "Action",
    "Grantee",
    "Outcome",
    "ServerClock",
    "Waiter",
    "WaiterTable",
    "decode_claim",
    "hold_back",
    "next_step",
    "waiters_channel",
]

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


class Grantee(Protocol):
    """A waiter that a release may grant the lock to (``G``), as the hub that reads the grant
    sees it (a fair Lock's: ``_async/lock_claim.py``).

    ``take(hub, waiter)``: ``waiter.grant`` was read; the grantee builds what ``acquire()``
    returns, sends its claim (its own lease) if it needs one, and returns ``None`` (the grant
    is dealt with) or a reply whose ``read()`` reads and applies the claim's reply. The hub
    wakes a claiming waiter only after reading its reply (its claim gives it the result, or
    not). ``abandon(result)`` drops a result the acquire did not return after all.
    """

    def take(self, hub: Any, waiter: Waiter) -> Any: ...  # pragma: no cover

    def abandon(self, result: Any) -> None: ...  # pragma: no cover


@dataclass(eq=False)
class Waiter:
    """One blocked acquire. ``event`` is the shell's Event; the table never touches it."""

    token: bytes
    event: Any
    woken: bool = False
    retry_at: float | None = None  # the lease we were told about runs out
    check_at: float | None = None  # the reservation of the waiter ahead of us lapses
    grantee: Grantee | None = None  # it may be granted the lock directly (a fair Lock)
    # (fence, local end of the grant's lease, fresh, that lease in ms): claim it unless it is
    # fresh and on the waiter's own lease; if not fresh, wake it after the claim
    grant: tuple[int, float, bool, int] | None = None
    result: Any = None  # what the grant made: acquire() returns it
    heard: float | None = None  # when an H (reserved for it) came, since its last attempt
    solo: bool = True  # its acquire waits on this hub alone (its thread may read the hub)
    promoted: bool = False  # rung to take over reading the hub (leader/follower)


class ServerClock:
    """How late a message from the server is read, from the server's clock in it.

    For a message the server stamped ``server_ms`` and this process read at ``now``
    (monotonic), ``now - server_ms`` is the clocks' offset plus the message's delay. The least
    such difference seen over the last ``horizon`` seconds (messages and claim replies) is the
    offset plus the shortest delay; a message's lateness is its difference minus that least
    one. Clock drift only makes messages look later (a slower server clock), which is safe,
    and the horizon forgets old samples. ``late()`` is ``None`` until a first sample.
    """

    def __init__(self, horizon: float = 30.0) -> None:
        self._horizon = horizon
        self._samples: deque[tuple[float, float]] = deque()  # (when, difference), increasing

    def sample(self, server_ms: int, now: float) -> None:
        """Record a message or reply stamped ``server_ms`` by the server, read at ``now``."""
        difference = now - server_ms / 1000
        samples = self._samples
        while samples and samples[-1][1] >= difference:
            samples.pop()
        samples.append((now, difference))
        while samples[0][0] < now - self._horizon:
            samples.popleft()

    def late(self, server_ms: int, now: float) -> float | None:
        """Seconds the message stamped ``server_ms`` was late when read at ``now``."""
        if not self._samples:
            return None
        return max(0.0, now - server_ms / 1000 - self._samples[0][1])


def decode_claim(raw: Any) -> tuple[bool, int]:
    """A claim script's reply ``{claimed, server ms}``."""
    try:
        return bool(int(raw[0])), int(raw[1])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from a claim script: {raw!r}") from exc


class WaiterTable:
    """The waiters of one hub, by token. Not thread-safe: the shell guards it."""

    def __init__(self) -> None:
        self._waiters: dict[bytes, Waiter] = {}
        self.clock = ServerClock()
        self.confirmed = False  # the hub's subscription is known to be active
        self.idle_since: float | None = 0.0

    def add(
        self, token: bytes, event: Any, grantee: Grantee | None = None, solo: bool = True
    ) -> Waiter:
        """Register a waiter (``grantee``: it may be granted the lock directly; ``solo``: its
        acquire waits on this hub alone)."""
        waiter = self._waiters[token] = Waiter(token, event, grantee=grantee, solo=solo)
        self.idle_since = None
        return waiter

    def needs_reader(self) -> bool:
        """Whether a waiter waits on other hubs too (Redlock): its thread cannot read this
        one, so a reader of the hub's own must."""
        return any(not w.solo for w in self._waiters.values())

    def remove(self, waiter: Waiter, now: float) -> None:
        """Unregister a waiter (its turn, if any, is passed on by leave.lua in Redis)."""
        if self._waiters.pop(waiter.token, None) is not None and not self._waiters:
            self.idle_since = now

    def registered(self, waiter: Waiter) -> bool:
        """Whether ``waiter`` is still waiting here."""
        return self._waiters.get(waiter.token) is waiter

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
        if kind == b"G":
            waiter.woken, waiter.check_at = True, None
            try:
                fence, lease_ms, server_ms = (int(x) for x in ms.split(b" "))
            except ValueError:
                return [waiter]  # not ours to read: try, which claims it if it is ours
            late = self.clock.late(server_ms, now)
            self.clock.sample(server_ms, now)
            if waiter.grantee is not None and waiter.result is None:
                # Fresh: read within half its lease, so the claim lands in time.
                fresh = late is not None and late < lease_ms / 2000
                ends = now - (late or 0.0) + lease_ms / 1000 - SLACK
                waiter.grant = (fence, ends, fresh, lease_ms)
            return [waiter]
        seconds = _seconds(ms)
        if kind == b"H":
            waiter.woken, waiter.check_at = True, None
            if waiter.heard is None:
                waiter.heard = now
            return [waiter]
        if kind == b"F":
            waiter.woken, waiter.check_at = True, now + seconds + SLACK
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


def hold_back(waiters: list[Waiter], need: int, patience: float, now: float) -> float | None:
    """Seconds to hold back an attempt that only reservation messages (``H``) call for, so
    that it waits for ``need`` servers' word (``None``: attempt now, or nothing to attempt).

    One acquire's ``waiters``, one per server (Redlock). A release reserves the lock for the
    queue head on every server, but a server runs it when it gets the CPU: an attempt sent on
    the first ``H`` finds the others still held by the releaser, is refused (or splits the
    vote, and its undo passes the turn on), and costs a round on every server. With ``need``
    servers' ``H`` (a majority reserved for it) the attempt wins. A waiter woken by anything
    else (a lapsed turn, a broken subscription) goes at once, and so does one that has waited
    ``patience`` since its first ``H``: a missing message delays the attempt, never loses it.
    """
    woken = [w for w in waiters if w.woken]
    if not woken or any(w.heard is None for w in woken):
        return None
    heard = [w.heard for w in waiters if w.heard is not None]
    if len(heard) >= need:
        return None
    left = min(heard) + patience - now
    return left if left > 0 else None
