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

__all__ = ["AsyncTurn", "Attempt", "Leave", "past", "wait_turn"]

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
    ``False``); the other arguments are :class:`AsyncTurn`'s. The primitive's ``attempt`` and
    ``leave`` are called from here; a primitive may instead drive an :class:`AsyncTurn` itself
    (``lock.py``), so that the calls go from it down, never back.
    """
    outcome: Outcome | None = None
    if not all(h.subscribed for h in hubs) or past(deadline):
        outcome = await attempt(False)  # the uncontended path: one round trip, nothing else
        if outcome.result is not None:
            return outcome.result
    turn = AsyncTurn(
        hubs,
        token,
        grantee,
        deadline=deadline,
        fallback=fallback,
        confirm=confirm,
        backoff=backoff,
        listen_error=listen_error,
        gather=gather,
    )
    try:
        join = await turn.next(outcome)
        while join is not None:
            join = await turn.next(await attempt(join))
        return turn.result
    finally:
        servers = turn.close()
        if servers:
            left = budget(deadline, socket_timeout, time.monotonic())
            if turn.gave_up:  # the answer is False only if Redis says we left
                await leave(servers, left)
            else:
                await AsyncShield.cleanup(lambda t: leave(servers, t), left)


class AsyncTurn:
    """One blocked acquire's state across its servers, and its steps: the waiting loop.

    Its driver tries, and asks :meth:`next` what to do after each try, until ``None``: then
    ``result`` is what the acquire returns (``None``: the deadline passed). :meth:`close`
    unregisters, and names the servers whose queues the driver must leave.

    ``deadline``: when to give up; ``fallback``: seconds to sleep when no lease end is known;
    ``confirm``: seconds a subscription has to be confirmed (default: the hub's); ``backoff``:
    after a split vote, a random pause of up to this many seconds; ``listen_error(i, exc)``:
    subscribing to server ``i`` failed; it may raise (one server) or not (N servers: one fewer
    voice); default: raise. ``grantee`` (one server): a release may grant the lock to this
    waiter directly, the hub builds the result through it and the wait returns it with no
    further try; ``gather`` (N servers): ``(tellers, patience)``, see
    ``_core.waiters.hold_back``.
    """

    def __init__(
        self,
        hubs: Sequence[AsyncHub],
        token: bytes,
        grantee: Grantee | None,
        *,
        deadline: float | None,
        fallback: float,
        confirm: float | None = None,
        backoff: float = 0.0,
        listen_error: Callable[[int, RedisError], None] | None = None,
        gather: tuple[int, float] | None = None,
    ) -> None:
        self.hubs, self.token, self.grantee = hubs, token, grantee
        self.deadline, self.fallback, self.confirm = deadline, fallback, confirm
        self.backoff, self.listen_error, self.gather = backoff, listen_error, gather
        self.event = AsyncEvent()
        self.waiters: list[Waiter] = []
        self.joined = False  # the last attempt queued (every hub listened)
        self.queued: tuple[int, ...] = ()  # the servers whose queue we are in
        self.gave_up = False  # the deadline passed: leaving must succeed, errors propagate
        self.result: Any = None  # what the acquire returns, once done

    async def next(self, outcome: Outcome | None) -> bool | None:
        """After a try's ``outcome`` (``None``: no try yet), whether the next try queues
        (``join``), or ``None``: done, ``result`` holds what the acquire returns.

        The first call with ``None`` registers, and the first try queues when every hub
        listens already: registered, the waiter keeps its hub from going idle, so its turn
        cannot go unheard. A first call with the outcome of a try made unregistered (the
        uncontended path) goes on from it."""
        if outcome is None:
            self.join()
            self.joined = all(h.subscribed for h in self.hubs)
            self.queued = tuple(range(len(self.hubs))) if self.joined else ()
            return self.joined
        self.queued = outcome.queued if self.joined else ()
        if outcome.result is not None:
            self.result = outcome.result
            return None
        if self.granted() is not None:
            return None
        if past(self.deadline):
            self.gave_up = True
            return None
        if not self.waiters:
            self.join()
        if self.joined and await self.rest(outcome):
            return None  # a grant, or None: the deadline passed
        await self.listen(outcome.answered)
        self.joined, self.queued = True, tuple(range(len(self.hubs)))
        return True

    def join(self) -> None:
        """Register with every hub."""
        one = len(self.hubs) == 1
        self.waiters = [hub.join(self.token, self.event, self.grantee, one) for hub in self.hubs]

    def granted(self) -> Any:
        """What a grant made for us (``None``: no grant came); a grant left the queue."""
        result = _granted(self.waiters)
        if result is not None:
            self.queued, self.result = (), result
        return result

    async def rest(self, outcome: Outcome) -> bool:
        """Queued: sleep until the turn may have come. True: the wait is over (``result``
        holds a grant, or ``None`` and ``gave_up``: the deadline passed)."""
        if outcome.split:  # let the other side of a split vote go first, at random
            await self.event.wait(random.uniform(0, self.backoff))
        for i, held, ms in outcome.refusals:
            self.hubs[i].refused(self.waiters[i], held, ms)
        hubs, waiters, event = self.hubs, self.waiters, self.event
        if not await _sleep(hubs, waiters, event, self.deadline, self.fallback, self.gather):
            if self.granted() is None:  # granted at the last moment: it is ours
                self.gave_up = True
            return True
        return self.granted() is not None

    async def listen(self, answered: Sequence[int]) -> None:
        """Subscribe where the servers answered and no subscription listens yet."""
        for i in answered:
            if not self.hubs[i].subscribed:
                try:
                    await self.hubs[i].ensure(self.waiters[i], self.deadline, self.confirm)
                except RedisError as exc:
                    if self.listen_error is None:
                        raise
                    self.listen_error(i, exc)

    def close(self) -> list[int]:
        """Unregister (dropping a grant's result that was not returned); the servers whose
        queues the driver must leave (passing on a turn we were given)."""
        for hub, waiter in zip(self.hubs, self.waiters, strict=False):
            hub.leave(waiter)
            made = waiter.result
            if self.grantee is not None and made is not None and made is not self.result:
                self.grantee.abandon(made)  # the same acquisition, returned another way
        return list(self.queued)


def past(deadline: float | None) -> bool:
    """Whether ``deadline`` (monotonic clock; ``None``: none) has passed."""
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
