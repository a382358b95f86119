"""The one waiting loop: every blocked acquire of every primitive runs it.

A primitive plugs in two things:

* ``attempt(join)``: one try on its server(s), returning an :class:`~redlease._core.waiters.
  Outcome` (``join``: if refused, queue up, because this process listens for its turn);
* ``leave(servers, timeout)``: leave the queues of those servers (the wait ended without the
  lock), raising the primitive's ``*Unavailable`` error if Redis fails.

The loop does the rest, the same for one server (``Lock``) and N (``Redlock``): register with
each server's waiter hub, try, sleep until a hub says the turn came (or a lease or a
reservation the attempt was told about runs out, or the deadline), subscribe where the
subscription is missing, try again; and on the way out, unregister and leave the queues.
"""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from redis.exceptions import RedisError

from .._core.bounds import budget
from .._core.waiters import Action, Grantee, Outcome, Waiter, hold_back, next_step
from .._synchronization import AsyncEvent, AsyncShield
from .hub import AsyncHub

__all__ = ["Attempt", "Leave", "wait_turn"]

Attempt = Callable[[bool], Awaitable["Outcome"]]
"""One try: ``attempt(join)``."""
Leave = Callable[[list[int], "float | None"], Awaitable["Any"]]
"""Leave the queues of the given servers, each reply within a timeout: ``leave(servers, t)``."""


async def wait_turn(
    hubs: Sequence[AsyncHub],
    token: bytes,
    attempt: Attempt,
    leave: Leave,
    *,
    deadline: float | None,
    socket_timeout: float | None,
    fallback: float,
    confirm: float | None = None,
    backoff: float = 0.0,
    listen_error: Callable[[int, RedisError], None] | None = None,
    grantee: Grantee | None = None,
    gather: tuple[int, float] | None = None,
) -> Any:
    """Try until an attempt succeeds (its ``result``) or ``deadline`` passes (``None``).

    ``hubs``: each server's waiter hub, in the servers' order; ``token``: the acquisition's (the
    hubs wake waiters by it); ``socket_timeout``: the longest one reply may take (a wait that
    gives up leaves the queues within it, and a failure to leave raises: an outage is never
    ``False``); ``fallback``: seconds to sleep when no lease end is known; ``confirm``: seconds a
    subscription has to be confirmed (default: the hub's); ``backoff``: after a split vote, a
    random pause of up to this many seconds; ``listen_error(i, exc)``: subscribing to server
    ``i`` failed; it may raise (one server) or not (N servers: one fewer voice); default: raise.
    ``grantee`` (one server): a release may grant the lock to this waiter directly, the hub
    builds the result through it and the wait returns it with no further round trip;
    ``gather`` (N servers): ``(tellers, patience)``, see ``_core.waiters.hold_back``.
    """
    outcome: Outcome | None = None
    if not all(h.subscribed for h in hubs) or _past(deadline):
        outcome = await attempt(False)  # the uncontended path: one round trip, nothing else
        if outcome.result is not None:
            return outcome.result
    turn = _Turn(hubs, token, grantee)
    try:
        if outcome is None:
            # Every hub listens already: register, then queue on the first try. Registered,
            # the waiter keeps its hub from going idle, so its turn cannot go unheard.
            outcome = await turn.first(attempt)
        while outcome.result is None:
            if turn.granted() is not None:
                return turn.result
            if _past(deadline):
                turn.gave_up = True
                return None
            if not turn.waiters:
                turn.join()
            if turn.joined and await turn.rest(outcome, deadline, fallback, backoff, gather):
                return turn.result  # a grant, or None: the deadline passed
            await turn.listen(outcome.answered, deadline, confirm, listen_error)
            turn.joined, turn.queued = True, tuple(range(len(hubs)))
            outcome = await attempt(True)
            turn.queued = outcome.queued
        return outcome.result
    finally:
        await turn.close(leave, deadline, socket_timeout)


class _Turn:
    """One blocked acquire's state across its servers: what the loop and its exit share."""

    def __init__(self, hubs: Sequence[AsyncHub], token: bytes, grantee: Grantee | None) -> None:
        self.hubs, self.token, self.grantee = hubs, token, grantee
        self.event = AsyncEvent()
        self.waiters: list[Waiter] = []
        self.joined = False  # the last attempt queued (every hub listened)
        self.queued: tuple[int, ...] = ()  # the servers whose queue we are in
        self.gave_up = False  # the deadline passed: leaving must succeed, errors propagate
        self.result: Any = None  # what a grant made, once returned

    def join(self) -> None:
        """Register with every hub."""
        one = len(self.hubs) == 1
        self.waiters = [hub.join(self.token, self.event, self.grantee, one) for hub in self.hubs]

    async def first(self, attempt: Attempt) -> Outcome:
        """Register, then try, queueing if every hub listens already."""
        self.join()
        self.joined = all(h.subscribed for h in self.hubs)
        self.queued = tuple(range(len(self.hubs))) if self.joined else ()
        outcome = await attempt(self.joined)
        self.queued = outcome.queued if self.joined else ()
        return outcome

    def granted(self) -> Any:
        """What a grant made for us (``None``: no grant came); a grant left the queue."""
        result = _granted(self.waiters)
        if result is not None:
            self.queued, self.result = (), result
        return result

    async def rest(
        self,
        outcome: Outcome,
        deadline: float | None,
        fallback: float,
        backoff: float,
        gather: tuple[int, float] | None,
    ) -> bool:
        """Queued: sleep until the turn may have come. True: the wait is over (``result``
        holds a grant, or ``None`` and ``gave_up``: the deadline passed)."""
        if outcome.split:  # let the other side of a split vote go first, at random
            await self.event.wait(random.uniform(0, backoff))
        for i, held, ms in outcome.refusals:
            self.hubs[i].refused(self.waiters[i], held, ms)
        if not await _sleep(self.hubs, self.waiters, self.event, deadline, fallback, gather):
            if self.granted() is None:  # granted at the last moment: it is ours
                self.gave_up = True
            return True
        return self.granted() is not None

    async def listen(
        self,
        answered: Sequence[int],
        deadline: float | None,
        confirm: float | None,
        listen_error: Callable[[int, RedisError], None] | None,
    ) -> None:
        """Subscribe where the servers answered and no subscription listens yet."""
        for i in answered:
            if not self.hubs[i].subscribed:
                try:
                    await self.hubs[i].ensure(self.waiters[i], deadline, confirm)
                except RedisError as exc:
                    if listen_error is None:
                        raise
                    listen_error(i, exc)

    async def close(self, leave: Leave, deadline: float | None, timeout: float | None) -> None:
        """Unregister, and leave the queues (passing on a turn we were given)."""
        for hub, waiter in zip(self.hubs, self.waiters, strict=False):
            hub.leave(waiter)
            made = waiter.result
            if self.grantee is not None and made is not None and made is not self.result:
                self.grantee.abandon(made)  # the same acquisition, returned another way
        if self.queued:
            servers = list(self.queued)
            left = budget(deadline, timeout, time.monotonic())
            if self.gave_up:  # the answer is False only if Redis says we left
                await leave(servers, left)
            else:
                await AsyncShield.cleanup(lambda t: leave(servers, t), left)


def _past(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


def _granted(waiters: list[Waiter]) -> Any:
    """What a grant made for one of ``waiters`` (``None``: no grant came)."""
    for waiter in waiters:
        if waiter.result is not None:
            return waiter.result
    return None


async def _sleep(
    hubs: Sequence[AsyncHub],
    waiters: list[Waiter],
    event: AsyncEvent,
    deadline: float | None,
    fallback: float,
    gather: tuple[int, float] | None = None,
) -> bool:
    """Sleep until some server's waiter should try again (True) or the deadline (False)."""
    while True:
        if gather is not None:
            tellers, patience = gather
            need = sum(1 for hub in hubs[:tellers] if hub.subscribed)
            now = time.monotonic()
            wait = hold_back(waiters, need, patience, now)
            if wait is not None and (deadline is None or now < deadline):
                await event.wait(wait if deadline is None else min(wait, deadline - now))
                event.clear()
                continue
        action, wait = next_step(
            [hub.plan(w, deadline, fallback) for hub, w in zip(hubs, waiters, strict=True)]
        )
        if action is not Action.WAIT:
            for waiter in waiters:
                waiter.heard = None  # the next attempt hears its own reservations
            return action is Action.ATTEMPT
        if len(hubs) == 1:
            await hubs[0].wait(waiters[0], wait)  # in a thread, it may read the hub itself
        else:
            await event.wait(wait)
        event.clear()
