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

    :param hubs: the waiter hub of each server, in the servers' order.
    :param token: the acquisition's token (the hubs wake waiters by it).
    :param socket_timeout: the longest one reply may take: a wait that gives up leaves the
        queues within it, and a failure to leave raises (an outage is never ``False``).
    :param fallback: seconds a waiter sleeps when no lease end is known.
    :param confirm: seconds a subscription has to be confirmed (default: the hub's).
    :param backoff: after a split vote, a random pause of up to this many seconds.
    :param listen_error: called when subscribing to server ``i`` fails; it may raise (one
        server: the wait cannot work) or not (N servers: one fewer voice). Default: raise.
    :param grantee: one server only: a release may grant the lock to this waiter directly;
        then the hub builds the result through ``grantee`` and the wait returns it with no
        further round trip (see :class:`~redlease._core.waiters.Grantee`).
    :param gather: N servers: ``(tellers, patience)``: woken by a reservation (``H``), wait
        up to ``patience`` seconds for the ``H`` of every one of the first ``tellers`` servers
        that listens, before an attempt (see :func:`~redlease._core.waiters.hold_back`).
    """
    n = len(hubs)
    outcome: Outcome | None = None
    if not all(h.subscribed for h in hubs) or (
        deadline is not None and time.monotonic() >= deadline
    ):
        outcome = await attempt(False)  # the uncontended path: one round trip, nothing else
        if outcome.result is not None:
            return outcome.result
    event = AsyncEvent()
    waiters: list[Waiter] = []
    joined = False
    queued: tuple[int, ...] = ()
    gave_up = False
    result: Any = None
    try:
        if outcome is None:
            # Every hub listens already: register, then queue on the first try. Registered,
            # the waiter keeps its hub from going idle, so its turn cannot go unheard.
            waiters = [hub.join(token, event, grantee, n == 1) for hub in hubs]
            joined = all(h.subscribed for h in hubs)
            queued = tuple(range(n)) if joined else ()
            outcome = await attempt(joined)
            queued = outcome.queued if joined else ()
        while outcome.result is None:
            result = _granted(waiters)
            if result is not None:
                queued = ()  # a release granted it: it left the queue then
                return result
            if deadline is not None and time.monotonic() >= deadline:
                gave_up = True
                return None
            if not waiters:
                waiters = [hub.join(token, event, grantee, n == 1) for hub in hubs]
            if joined:
                if outcome.split:  # let the other side of a split vote go first, at random
                    await event.wait(random.uniform(0, backoff))
                for i, held, ms in outcome.refusals:
                    hubs[i].refused(waiters[i], held, ms)
                if not await _sleep(hubs, waiters, event, deadline, fallback, gather):
                    result = _granted(waiters)  # granted at the last moment: it is ours
                    if result is not None:
                        queued = ()
                        return result
                    gave_up = True
                    return None
                result = _granted(waiters)
                if result is not None:
                    queued = ()
                    return result
            for i in outcome.answered:  # listen where the servers answer
                if not hubs[i].subscribed:
                    try:
                        await hubs[i].ensure(waiters[i], deadline, confirm)
                    except RedisError as exc:
                        if listen_error is None:
                            raise
                        listen_error(i, exc)
            joined, queued = True, tuple(range(n))
            outcome = await attempt(True)
            queued = outcome.queued
        return outcome.result
    finally:
        for hub, waiter in zip(hubs, waiters, strict=False):
            hub.leave(waiter)
            if grantee is not None and waiter.result is not None and waiter.result is not result:
                grantee.abandon(waiter.result)  # the same acquisition, returned another way
        if queued:  # leave the queues too, and pass on a turn we were given
            servers = list(queued)
            left = budget(deadline, socket_timeout, time.monotonic())
            if gave_up:  # the answer is False only if Redis says we left: errors propagate
                await leave(servers, left)
            else:
                await AsyncShield.cleanup(lambda timeout: leave(servers, timeout), left)


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
