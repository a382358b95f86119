"""Redlock: one lock over N independent Redis servers, held with a majority of them."""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis.asyncio
from redis.exceptions import RedisError

from .._core import redlock as core
from .._core import renewals, validate
from .._core.holder import name_of
from .._core.kept import forget_frames
from .._core.lease import Holding, new_token
from .._core.lock import (
    ACQUIRE,
    EXTEND,
    FENCE,
    INSPECT,
    LEAVE,
    RELEASE,
    RENEW,
    LockInfo,
    decode_inspect,
)
from .._core.scripts import Script
from .._core.waiters import WAITERS, Outcome
from .._fanout import NOT_YET, AsyncFanOut, Late, Unsent, hung
from .._synchronization import AsyncBackground, AsyncShield
from ..errors import QuorumUnavailable
from .client import AsyncBackend
from .flavor import check_client
from .handle import AsyncHandle
from .runtime import AsyncRuntime, runtime_for
from .server import connecting_by
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
        self._identified: dict[int, tuple[str, int]] = {}  # server -> (run_id, db)
        self._servers: _Servers | None = None  # the runtimes of the clients, while current

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
        if len(mine) < self.quorum:
            return 0.0
        majority_ms = sorted(mine, reverse=True)[self.quorum - 1]
        return max(0.0, (majority_ms - core.drift_ms(holding.ttl_ms, self._drift_factor)) / 1000)

    # -- the conversation with Redis --------------------------------------------------------
    def _current(self) -> _Servers:
        """The clients' runtimes and what rounds use of them, kept while they are current
        (none closed, same process or event loop): looked up once, not on every round."""
        servers = self._servers
        if servers is not None:
            scope = AsyncBackground.scope()
            for rt in servers.runtimes:  # (a loop, not all(): this runs on every round)
                if rt.scope != scope or rt.closed:
                    break
            else:
                return servers
        runtimes = tuple(runtime_for(c) for c in self._clients)
        # Each round is bounded by ``server_timeout`` by the fan-out, while a connection's own
        # reads may take ``SLACK`` more (asyncio), so that a late reply is collected (and
        # whatever was sent behind it read), not its connection closed.
        timeout = self.server_timeout + AsyncFanOut.SLACK
        # (one server each: a cluster client was refused in __init__)
        backends = tuple(cast(AsyncBackend, rt.backend.with_deadline(timeout)) for rt in runtimes)
        renewal = AsyncQuorumRenewal(backends, self.quorum, self._drift_factor, self.server_timeout)
        self._servers = _Servers(runtimes, backends, renewal)
        return self._servers

    def _runtimes(self) -> tuple[AsyncRuntime, ...]:
        return self._current().runtimes

    def _runtime(self) -> AsyncRuntime:
        return self._current().runtimes[0]

    def _backends(self) -> tuple[AsyncBackend, ...]:
        """The servers for rounds (see :meth:`_current`)."""
        return self._current().backends

    async def _round(
        self,
        script: Script,
        keys: list[bytes],
        args: list[Any],
        servers: Sequence[int] = (),
        *,
        enough: Callable[[list[Any]], bool] | None = None,
        quiet: list[Any] | None = None,
        hold: bool = False,
    ) -> list[Any]:
        """Run ``script`` on the given servers (default: all) at once; replies or exceptions
        (:class:`Late` for a reply not read yet: ``enough(replies)``, asked only of a round
        over all servers, let it return, or the server's deadline passed). ``quiet``: the args
        of the servers that need not tell waiters (:func:`core.tellers`), in a round over all
        servers."""
        backends = self._backends()
        chosen = list(servers) if servers else list(range(len(backends)))
        tellers = len(backends) if quiet is None or servers else core.tellers(len(backends))
        replies = await AsyncFanOut.run(
            [(backends[i], script, keys, args if i < tellers else quiet or args) for i in chosen],
            self.server_timeout,
            None if servers else enough,  # (rounds over some of the servers read them all)
            hold=hold,
        )
        out: list[Any] = [None] * len(backends)
        for i, reply in zip(chosen, replies, strict=True):
            out[i] = reply
        return out

    async def _check_servers(self) -> None:
        """Refuse one server given twice (by its run_id and database), once all answered.

        A server known not to answer is asked once it answers a round again (see
        :func:`~redlease._fanout.hung`): asked before every acquire, it would cost each one
        a deadline while it hangs."""
        missing = [i for i in range(len(self._clients)) if i not in self._identified]
        if not missing:
            return
        backends = [rt.backend.with_deadline(self.server_timeout) for rt in self._runtimes()]
        missing = [i for i in missing if not hung(backends[i])]

        async def identify(i: int) -> tuple[str, int]:
            return await backends[i].identify()

        for i, found in zip(missing, await AsyncFanOut.gather(identify, missing), strict=True):
            if not isinstance(found, BaseException):
                self._identified[i] = found
        core.check_distinct(self._identified)

    async def _acquire(self, owner: Hashable, deadline: float | None) -> Holding | None:
        await self._check_servers()
        token = new_token(name_of(owner))
        ticket = str(time.time_ns() // 1000)  # one place in every server's queue
        n = len(self._clients)

        async def attempt(join: bool) -> Outcome:
            holding, tally = await self._try(owner, token, join=join, ticket=ticket)
            if holding is not None:
                # (granted: it left that queue; left: a leave was sent behind the late acquire)
                stay = set(tally.granted) | tally.left
                queued = tuple(i for i in range(n) if i not in stay) if join else ()
                return Outcome(result=holding, queued=queued)
            answered = tuple(i for i in range(n) if i not in tally.errors)
            refusals = tuple(
                (i, held, max(ms))
                for i in answered
                for held, ms in ((True, tally.lease_ms), (False, tally.check_ms))
                if ms
            )
            return Outcome(
                refusals=refusals,
                answered=answered,
                queued=tuple(range(n)) if join else (),
                split=bool(tally.granted),
            )

        async def leave(servers: list[int], timeout: float | None) -> None:
            keys, args = self._queue_args(token)
            # A hung server is not waited for (it would cost the caller a deadline): it is
            # told nothing now, and when it answers again, its queue skips a waiter that
            # does not take its turn.
            backends = self._backends()
            told = [i for i in servers if not hung(backends[i])]
            some = told if len(told) < n else ()  # all of them: only some tell
            replies = (
                await self._round(LEAVE, keys, args, some, quiet=core.quiet(args))
                if told
                else [None] * n
            )
            for i in set(servers) - set(told):
                replies[i] = Unsent(backends[i])
            self._require_answers("leave the queues of", core.failures(replies))

        holding: Holding | None = await wait_turn(
            [rt.hub for rt in self._runtimes()],
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
        keys = self._keys
        start = time.monotonic()
        args = [token, self._ttl_ms, int(join), self._window_ms, WAITERS, ticket, core.MODE]
        args.append(core.TELL)  # the next waiter hears that we took it from a few servers
        tally = core.tally(
            await self._round(
                ACQUIRE,
                [keys.lock, keys.fence, keys.queue, keys.handoff],
                args,
                enough=core.acquire_settled,
                quiet=core.quiet(args),
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
        keys = self._keys
        known = tally.fence_known
        if known and core.validity(self._ttl_ms, time.monotonic() - start, 0) > 0:
            fence = tally.fence
            confirmed = len(tally.granted)
            if any(counter != fence for counter in tally.granted.values()):
                # Raise the lagging counters to the fence; where they all equal it already
                # (always, with one server), this round would change nothing.
                replies = await self._round(
                    FENCE, [keys.lock, keys.fence], [token, fence], servers=list(tally.granted)
                )
                confirmed = sum(1 for i in tally.granted if _is_one(replies[i]))
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
        keys = self._keys
        leave_keys, leave_args = self._queue_args(token)
        rest = []
        for i, error in tally.errors.items():
            if not isinstance(error, Late) or isinstance(error, Unsent):
                continue  # (an unsent acquire ran nowhere)
            reply = await AsyncFanOut.arrived(error)
            if reply is NOT_YET:
                if await AsyncFanOut.follow(error, FENCE, [keys.lock, keys.fence], [token, fence]):
                    if queued and await AsyncFanOut.follow(error, LEAVE, leave_keys, leave_args):
                        tally.left.add(i)
                    continue
                reply = await AsyncFanOut.arrived(error)  # it came between the two looks
            if reply is NOT_YET or core.needs_fence(reply, fence):
                rest.append(i)
            if reply is not NOT_YET and core.dequeued(reply):
                tally.left.add(i)  # (its grant took the token out of that queue)
        if rest:  # an ordinary round (rare: a server restarted empty, or lagging)
            await self._round(FENCE, [keys.lock, keys.fence], [token, fence], servers=rest)

    async def _undo(
        self, token: bytes, servers: list[int], errors: dict[int, Any], ticket: str | None
    ) -> None:
        """Release ``token`` on ``servers``: behind the acquire itself where its reply is late
        (so the server runs the release after it, however late), else in a new round. With a
        ``ticket``, the caller goes on waiting: each server it is released on queues it under
        that ticket first (release.lua ``requeue``), so that every queue has it."""
        keys, args = self._queue_args(token)
        if ticket is not None:
            args = core.requeue(args, ticket, self._ttl_ms)
        rest = [
            i
            for i in servers
            if not (
                isinstance(errors.get(i), Late)
                and await AsyncFanOut.follow(errors[i], RELEASE, keys, args)
            )
        ]
        if rest:
            await self._round(RELEASE, keys, args, servers=rest)

    async def _release_remote(self, holding: Holding) -> None:
        # Returns at a majority released: the rest release on their own (already sent).
        keys, args = self._queue_args(holding.token)
        replies = await self._round(
            RELEASE, keys, args, enough=core.majority_done, quiet=core.quiet(args)
        )
        self._require_quorum("release", replies, holding, count_lost=False)

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        start = time.monotonic()
        replies = await self._round(EXTEND, [holding.key], [holding.token, ttl_ms])
        self._require_quorum("extend", replies, holding, count_lost=True)
        valid = core.validity(ttl_ms, time.monotonic() - start, self._drift_factor)
        if valid <= 0:
            raise self._mark_lost(holding)
        holding.extended(start, ttl_ms)

    def _require_quorum(
        self, action: str, replies: list[Any], holding: Holding, *, count_lost: bool
    ) -> None:
        """Raise unless a majority did it: QuorumUnavailable if too few answered, else lost."""
        done = sum(1 for r in replies if _is_one(r))
        if done >= self.quorum:
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
        return self._current().renewal

    async def _inspect(self, token: bytes) -> list[LockInfo]:
        """The lock as each answering server sees it (``mine``: held with ``token``)."""
        replies = await self._round(INSPECT, self._keys.in_order(), [token])
        self._require_answers("inspect", core.failures(replies))
        return [
            decode_inspect(r, self.name, self._keys)
            for r in replies
            if not isinstance(r, BaseException)
        ]

    def _queue_args(self, token: bytes) -> tuple[list[bytes], list[Any]]:
        """KEYS and ARGV of release.lua and leave.lua: reservation mode, telling waiters."""
        keys = self._keys
        return (
            [keys.lock, keys.queue, keys.handoff, keys.fence],
            [token, self._window_ms, WAITERS, core.MODE, 0, core.TELL],
        )


@dataclass(frozen=True)
class AsyncQuorumRenewal:
    """Renews batches of Redlock holdings on all their servers; each counts with a majority.

    Equal for Redlocks over the same servers and settings, so their renewals share one round.
    """

    backends: tuple[AsyncBackend, ...]
    quorum: int
    drift_factor: float
    timeout: float

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]:
        """Per holding True (renewed on a majority in time) / False (lost); raises
        ``RedisError`` when fewer than a majority answered (cannot tell)."""
        keys, args = renewals.batch_call(due)
        start = time.monotonic()
        end = min(h.expires_at for h in due)  # (a connection opened meanwhile: by then too)
        with connecting_by(max(end, start + self.timeout)):
            replies = await AsyncFanOut.run(
                [(backend, script, keys, args) for backend in self.backends], self.timeout
            )
        answered = []
        for reply in replies:
            if isinstance(reply, BaseException):  # dropped: not left in a cycle (see kept.py)
                forget_frames(reply)
            try:
                answered.append(renewals.decode(reply, len(due)))
            except (TypeError, ValueError):  # an exception in its place, or nonsense
                continue
        if len(answered) < self.quorum:  # cannot tell: try again soon, until validity ends
            raise RedisError(
                f"{len(answered)} of {len(self.backends)} servers answered, {self.quorum} needed"
            )
        elapsed = time.monotonic() - start
        return [
            sum(1 for renewed in answered if renewed[j]) >= self.quorum
            and core.validity(h.ttl_ms, elapsed, self.drift_factor) > 0
            for j, h in enumerate(due)
        ]


@dataclass(frozen=True)
class _Servers:
    """What a Redlock's rounds use of its clients' runtimes (see ``AsyncRedlock._current``)."""

    runtimes: tuple[AsyncRuntime, ...]
    backends: tuple[AsyncBackend, ...]
    renewal: AsyncQuorumRenewal


def _one_voice_fewer(server: int, exc: Exception) -> None:
    """A server whose waiters' channel cannot be subscribed is one voice fewer, not an error."""


def _is_one(reply: Any) -> bool:
    return not isinstance(reply, BaseException) and reply is not None and int(reply) == 1
