"""Redlock: one lock over N independent Redis servers, held with a majority of them."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import redis.asyncio

from .._core import redlock as core
from .._core import redlock_argv as argv
from .._core import validate
from .._core.holder import name_of
from .._core.lease import Holding, new_token
from .._core.lock import (
    ACQUIRE_RESERVING,
    EXTEND,
    FENCE,
    INSPECT,
    LEAVE,
    RELEASE,
    RENEW,
    LockInfo,
    decode_inspect,
)
from .._core.waiters import Outcome
from .._fanout import NOT_YET, AsyncFanOut, Late, Unsent, hung
from .._synchronization import AsyncShield
from ..errors import QuorumUnavailable
from .flavor import check_client
from .handle import AsyncHandle
from .redlock_renewal import AsyncQuorumRenewal
from .redlock_servers import AsyncRedlockServers
from .runtime import AsyncRuntime
from .waiting import wait_turn

__all__ = ["AsyncRedlock"]


class AsyncRedlock(AsyncHandle):
    """A lock held on a majority of N independent Redis servers (the Redlock algorithm).

    Same API and semantics as :class:`Lock` (``acquire``, ``release``, ``extend``, ``with``,
    ``locked``, ``owned``, ``remaining``, ``fence``, the watchdog, ``on_lost``), plus
    :attr:`validity`. It keeps working while a minority of the servers is down, hung, or
    restarted empty, where a single-server lock is lost with its server.

    Each acquire asks all servers at once, each under a per-server deadline
    (``server_timeout``), and holds the lock only if a majority granted it and
    ``validity = ttl - elapsed - (ttl * drift_factor + 2 ms)`` is still positive; it returns
    as soon as a majority granted (the other replies are collected afterwards, off the
    caller's path), and ``release()`` as soon as a majority released. Otherwise it releases
    on every server, including those that did not answer (where the reply is late, behind the
    acquire on the same connection, so a late grant is always undone), and waits: for a release
    message from any server, or for the lease it was told about to end. Waiters queue on every
    server under one ticket, so all servers agree on who is next: no split votes.

    Fencing tokens strictly increase across holders as long as the servers that lost their
    data (restarted empty) and were not written back since are never a majority: the fence is
    the largest counter of the granting servers, written back to them before the acquire
    counts, and it counts only if a majority of them *have* a counter for the name (a server
    that lost its data has none), so it meets a server that has seen the last fence.
    Otherwise ``acquire()`` raises :class:`~redlease.QuorumUnavailable` rather than guess.
    See ``docs/safety.md`` for when Redlock is worth it, and its persistence and clock
    assumptions.

    With fewer than a majority of servers answering, ``acquire()`` raises
    :class:`~redlease.QuorumUnavailable` (plain contention returns ``False``).
    """

    def __init__(
        self,
        clients: Sequence[redis.asyncio.Redis],
        name: str | bytes,
        *,
        ttl: float = 10.0,
        timeout: float | None = None,
        prefix: str = "redlease",
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
        handoff: float = 0.05,
        drift_factor: float = 0.01,
        server_timeout: float = 0.1,
        allow_small_quorum: bool = False,
    ) -> None:
        """Describe a lock over ``clients``, one per independent server.

        :param clients: one client per server (3 or more; 5 is usual). The same server twice
            (under another address, or another database of it) raises ``ValueError`` at the
            first acquire: it would fake a quorum.
        :param allow_small_quorum: accept 1 or 2 servers. Redlock over 1 server is a plain
            lock, and over 2 it needs both, so it survives no server failing: refused unless
            you say so here (e.g. for tests, or on the way to 3 servers).
        :param drift_factor: the share of the lease allowed for clock drift, in [0, 0.5).
        :param server_timeout: seconds each server has to answer one round; much shorter than
            ``ttl`` (the Redis documentation suggests 5-50 ms for a 10 s lease).

        The other parameters are :class:`Lock`'s.
        """
        self._clients = core.check_clients(clients, allow_small_quorum=allow_small_quorum)
        for i, client in enumerate(self._clients):
            check_client(client, f"clients[{i}]", cluster=False)
        self._drift_factor = core.check_drift_factor(drift_factor)
        super().__init__(
            name,
            ttl=ttl,
            timeout=timeout,
            prefix=prefix,
            renew=renew,
            on_lost=on_lost,
            handoff=handoff,
        )
        self._server_ms = validate.ttl_ms(server_timeout, "server_timeout")
        if self._server_ms * 2 > self._ttl_ms:
            raise ValueError(
                f"server_timeout must be less than half the ttl ({self.ttl} s), "
                f"got {server_timeout!r}"
            )
        self.server_timeout = self._server_ms / 1000
        self.quorum = core.quorum(len(self._clients))
        self._servers = AsyncRedlockServers(
            self._clients, self.quorum, self._drift_factor, self.server_timeout
        )
        keys = self._keys  # the KEYS of the scripts, in the orders their contracts give
        self._lock_keys = keys.in_order()  # acquire, release, leave
        self._fence_keys = [keys.lock, keys.fence]

    # -- state ------------------------------------------------------------------------------
    @property
    def validity(self) -> float | None:
        """Seconds the current acquisition is known to stay valid (``None`` when not held).

        A local estimate from the last acquire or renewal: ttl minus the time that round took
        minus the drift allowance. 0.0 once it has passed.
        """
        holding = self._held()
        if holding is None:
            return None
        return 0.0 if holding.lost else max(0.0, holding.expires_at - time.monotonic())

    async def inspect(self) -> LockInfo:
        """A snapshot of the lock over its servers, in one round: held (by one holder on a
        majority), by whom (``held_by``) and on how many servers (``servers``), by this
        handle, the lease a majority has left, the largest fence and queue reported.

        Raises :class:`~redlease.QuorumUnavailable` when fewer than a majority answer,
        :class:`~redlease.ForeignData` if a key holds data redlease did not write.
        """
        holding = self._holding
        infos = await self._inspect(b"" if holding is None else holding.token)
        return core.merge_inspect(self.name, infos, self.quorum)

    async def locked(self) -> bool:
        """Whether a majority of the servers report the lock held (one round)."""
        return sum(1 for info in await self._inspect(b"") if info.held) >= self.quorum

    async def owned(self) -> bool:
        """Whether this handle's acquisition still holds a majority of the servers."""
        holding = self._held()
        if holding is None:
            return False
        infos = await self._inspect(holding.token)
        return sum(1 for info in infos if info.mine) >= self.quorum

    async def remaining(self) -> float | None:
        """Seconds a majority still holds this handle's lease, less the drift allowance.

        ``None`` if the handle holds nothing, 0.0 if a majority no longer holds it.
        """
        holding = self._held()
        if holding is None:
            return None
        mine = [
            self.ttl * 1000 if info.remaining is None else info.remaining * 1000
            for info in await self._inspect(holding.token)
            if info.mine
        ]
        drift = core.drift_ms(holding.ttl_ms, self._drift_factor)
        return core.majority_remaining(mine, self.quorum, drift)

    # -- the conversation with Redis --------------------------------------------------------
    def _runtime(self) -> AsyncRuntime:
        return self._servers.runtimes()[0]

    async def _acquire(self, owner: Hashable, deadline: float | None) -> Holding | None:
        await self._servers.check()
        token = new_token(name_of(owner))
        ticket = str(time.time_ns() // 1000)  # one place in every server's queue
        n = len(self._clients)

        async def attempt(join: bool) -> Outcome:
            # A round cancelled half-way would leave tokens queued or granted behind the
            # leave: it ends (within server_timeout), then what it took is given back.
            holding, tally = await AsyncShield.through(
                lambda: self._try(owner, token, join=join, ticket=ticket), give_back
            )
            return core.outcome(tally, holding, join=join)

        async def give_back(result: tuple[Holding | None, core.Tally]) -> None:
            holding, tally = result
            if holding is not None:
                await self._undo(
                    token, sorted(set(tally.granted) | set(tally.errors)), tally.errors, None
                )

        async def leave(servers: list[int], timeout: float | None) -> None:
            # A hung server is not waited for (it would cost the caller a deadline): it is
            # told nothing now, and when it answers again, its queue skips a waiter that
            # does not take its turn.
            backends = self._servers.backends()
            told = [i for i in servers if not hung(backends[i])]
            some = told if len(told) < n else ()  # all of them: only some tell
            args = argv.leave(token=token, window_ms=self._window_ms)
            replies = (
                await self._servers.round(LEAVE, self._lock_keys, args, some)
                if told
                else [None] * n
            )
            for i in set(servers) - set(told):
                replies[i] = Unsent(backends[i])
            self._require_answers("leave the queues of", core.failures(replies))

        holding: Holding | None = await wait_turn(
            [rt.hub for rt in self._servers.runtimes()],
            token,
            attempt,
            leave,
            deadline=deadline,
            socket_timeout=self.server_timeout,
            fallback=self.ttl,
            confirm=self.server_timeout,
            backoff=2 * self._window_ms / 1000,
            listen_error=_one_voice_fewer,
            # Woken by one server's H, wait (briefly: the reservation lasts one hand-off
            # window) until every teller has reserved it: a majority, so the round wins.
            gather=(core.tellers(n), self._window_ms / 4000),
        )
        return holding

    async def _try(
        self, owner: Hashable, token: bytes, *, join: bool, ticket: str
    ) -> tuple[Holding | None, core.Tally]:
        """One Redlock round: acquire everywhere, merge and write back the fence, or undo."""
        start = time.monotonic()
        args = argv.acquire(
            token=token, ttl_ms=self._ttl_ms, join=join, window_ms=self._window_ms, ticket=ticket
        )
        tally = core.tally(
            await self._servers.round(
                ACQUIRE_RESERVING,
                self._lock_keys,
                args,
                enough=core.acquire_settled,
                hold=True,  # a late grant may need a release behind it (below)
            )
        )
        try:
            return await self._settle(owner, token, start, tally, ticket=ticket if join else None)
        finally:
            await AsyncFanOut.release(list(tally.errors.values()))

    async def _settle(
        self, owner: Hashable, token: bytes, start: float, tally: core.Tally, *, ticket: str | None
    ) -> tuple[Holding | None, core.Tally]:
        """Held if a majority granted in time (the fence merged); else undone everywhere.
        ``ticket``: the round queued the caller (it goes on waiting) under this ticket."""
        known = tally.fence_known
        if known and core.validity(self._ttl_ms, time.monotonic() - start, 0) > 0:
            fence = tally.fence
            confirmed = len(tally.granted)
            if any(counter != fence for counter in tally.granted.values()):
                # Raise the lagging counters to the fence; where they all equal it already
                # (always, with one server), this round would change nothing.
                replies = await self._servers.round(
                    FENCE, self._fence_keys, [token, fence], servers=list(tally.granted)
                )
                confirmed = sum(1 for i in tally.granted if core.done(replies[i]))
            valid = core.validity(self._ttl_ms, time.monotonic() - start, self._drift_factor)
            if confirmed >= self.quorum and valid > 0:
                await self._catch_up(token, fence, tally, queued=ticket is not None)
                holding = self._holding_for(
                    owner, token, fence, start + valid, self._renewal(), RENEW
                )
                holding.drift_ms = core.drift_ms(self._ttl_ms, self._drift_factor)
                return holding, tally
        # Not held: undo wherever it may have been granted, answered or not (not where the
        # acquire was never sent).
        unsent = {i for i, error in tally.errors.items() if isinstance(error, Unsent)}
        undo = sorted((set(tally.granted) | set(tally.errors)) - unsent)
        if undo:
            await AsyncShield.cleanup(
                lambda timeout: self._undo(token, undo, tally.errors, ticket),
                None,  # one round, each server bounded by server_timeout
            )
        self._require_answers("acquire", tally)
        if tally.has_quorum and not known and not (tally.lease_ms or tally.reserved_ms):
            # (With a refusal in the tally, another holder is at work: contention, try again.)
            raise QuorumUnavailable(
                f"could not acquire lock {self.name!r}: {tally.fence_unknown()}",
                name=self.name,
                errors=tally.errors,
            )
        return None, tally

    async def _catch_up(self, token: bytes, fence: int, tally: core.Tally, *, queued: bool) -> None:
        """Write the fence back to the servers whose acquire reply is late too, where it may
        be needed: a server without a counter (restarted empty) gets one, so that it counts
        again. A reply that has come meanwhile says whether it is (it rarely is: the counters
        move together); one still on its way gets the write-back behind it, on its connection
        (fence.lua does nothing where the lock is not ours), and, if the acquire ``queued``
        (joined the queues), the leave of that server's queue (where the late acquire is
        refused, it leaves the token queued), noted in ``tally.left``: the acquire returns
        without waiting for the late servers."""
        fence_keys, fence_args = self._fence_keys, [token, fence]
        leave_args = argv.leave(token=token, window_ms=self._window_ms).told
        rest = []
        for i, error in tally.errors.items():
            if not isinstance(error, Late) or isinstance(error, Unsent):
                continue  # (an unsent acquire ran nowhere)
            reply = await AsyncFanOut.arrived(error)
            if reply is NOT_YET:
                if await AsyncFanOut.follow(error, FENCE, fence_keys, fence_args):
                    if queued and await AsyncFanOut.follow(
                        error, LEAVE, self._lock_keys, leave_args
                    ):
                        tally.left.add(i)
                    continue
                reply = await AsyncFanOut.arrived(error)  # it came between the two looks
            if reply is NOT_YET or core.needs_fence(reply, fence):
                rest.append(i)
            if reply is not NOT_YET and core.dequeued(reply):
                tally.left.add(i)  # (its grant took the token out of that queue)
        if rest:  # an ordinary round (rare: a server restarted empty, or lagging)
            await self._servers.round(FENCE, fence_keys, fence_args, servers=rest)

    async def _undo(
        self, token: bytes, servers: list[int], errors: dict[int, Any], ticket: str | None
    ) -> None:
        """Release ``token`` on ``servers``: behind the acquire itself where its reply is late
        (so the server runs the release after it, however late), else in a new round. With a
        ``ticket``, the caller goes on waiting: each server it is released on queues it under
        that ticket first (release.lua ``requeue``), so that every queue has it."""
        requeue = "" if ticket is None else argv.requeue(ticket, self._ttl_ms)
        args = argv.release(token=token, window_ms=self._window_ms, requeue=requeue).told
        keys = self._lock_keys
        rest = [
            i
            for i in servers
            if not (
                isinstance(errors.get(i), Late)
                and await AsyncFanOut.follow(errors[i], RELEASE, keys, args)
            )
        ]
        if rest:
            await self._servers.round(RELEASE, keys, args, servers=rest)

    async def _release_remote(self, holding: Holding) -> None:
        # Returns at a majority released: the rest release on their own (already sent).
        args = argv.release(token=holding.token, window_ms=self._window_ms)
        replies = await self._servers.round(
            RELEASE, self._lock_keys, args, enough=core.majority_done
        )
        self._require_quorum("release", replies, holding, count_lost=False)

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        start = time.monotonic()
        replies = await self._servers.round(EXTEND, [holding.key], [holding.token, ttl_ms])
        self._require_quorum("extend", replies, holding, count_lost=True)
        valid = core.validity(ttl_ms, time.monotonic() - start, self._drift_factor)
        if valid <= 0:
            raise self._mark_lost(holding)
        holding.extended(start, ttl_ms)

    def _require_quorum(
        self, action: str, replies: list[Any], holding: Holding, *, count_lost: bool
    ) -> None:
        """Raise unless a majority did it: QuorumUnavailable if too few answered, else lost."""
        if sum(1 for r in replies if core.done(r)) >= self.quorum:
            return
        self._require_answers(action, core.failures(replies))
        if count_lost:
            raise self._mark_lost(holding)
        holding.lost = True
        raise self._lost(f"was lost before {action}: its lease ran out or it was taken")

    def _require_answers(self, action: str, tally: core.Tally) -> None:
        """Raise QuorumUnavailable when fewer than a majority of the servers answered."""
        if tally.answered < self.quorum:
            raise QuorumUnavailable(
                f"could not {action} lock {self.name!r}: {tally.unavailable()}",
                name=self.name,
                errors=tally.errors,
            )

    def _renewal(self) -> AsyncQuorumRenewal:
        return self._servers.current().renewal

    async def _inspect(self, token: bytes) -> list[LockInfo]:
        """The lock as each answering server sees it (``mine``: held with ``token``)."""
        replies = await self._servers.round(INSPECT, self._keys.in_order(), [token])
        self._require_answers("inspect", core.failures(replies))
        return [
            decode_inspect(r, self.name, self._keys)
            for r in replies
            if not isinstance(r, BaseException)
        ]


def _one_voice_fewer(server: int, exc: Exception) -> None:
    """A server whose waiters' channel cannot be subscribed is one voice fewer, not an error."""
