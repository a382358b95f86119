"""Lock and RLock: a lease on one Redis server, fenced, renewed, fair, woken by pub/sub."""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Hashable
from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from .. import _observe
from .._core import handover, validate
from .._core.bounds import budget
from .._core.breakglass import ForceReleased
from .._core.holder import name_of
from .._core.lease import Holding, new_token
from .._core.lock import (
    ACQUIRE,
    BARGING,
    CLAIM,
    EXTEND,
    FAIR,
    HELD,
    INSPECT,
    LEAVE,
    RELEASE,
    RENEW,
    LockInfo,
    acquire_args,
    claim_args,
    decode_acquire,
    decode_inspect,
    leave_args,
    release_args,
)
from .._core.replicas import unacknowledged, wait_command
from .._core.waiters import Outcome
from .._synchronization import AsyncBackground, AsyncShield
from .breakglass import force_release_lock
from .flavor import check_client
from .handle import DEFAULT, AsyncHandle
from .hub import AsyncHub
from .lock_claim import AsyncGrantee
from .runtime import AsyncRuntime
from .waiting import AsyncTurn, past

__all__ = ["AsyncLock", "AsyncRLock"]


class AsyncLock(AsyncHandle):
    """A distributed mutual-exclusion lock held as a lease on one Redis server.

    ``Lock(client, name, ttl=10.0, timeout=None)``: acquiring sets the key with a random token
    and a lease of ``ttl`` seconds; releasing deletes it only if the token is still ours. While
    held, a watchdog renews the lease every ``ttl / 3`` (``renew=False`` turns it off), so slow
    work keeps the lock and a dead process loses it within ``ttl``.

    Guaranteed, while the server keeps its data and clocks run at a sane rate:

    * at most one holder at a time: a holder's lease is only ever set by its own token;
    * ``fence`` strictly increases over the successive holders of a name, also after a lease
      ran out and someone else took it. Pass it to your storage and reject older ones: that
      keeps a paused or partitioned ex-holder from corrupting data;
    * waiters are served in the order they queued (across processes): a release hands the
      lock to the first waiter directly, in the message that wakes it (no further round trip
      before its ``acquire()`` returns); waiters retry when the lease they were told about
      runs out, so a lost message costs at most a lease. ``fair=False`` trades the order for
      throughput (see its parameter);
    * a holder learns it lost the lock: ``on_lost`` is called from the watchdog, and
      ``release()`` raises :class:`~redlease.LockLost`;
    * a Redis failure raises :class:`~redlease.LockUnavailable` (never ``False``).

    Not guaranteed (no lease-based lock can): exclusion when the holder pauses longer than the
    lease (GC, SIGSTOP, swap) and keeps writing without fencing; exclusion across a failover to
    a replica that had not received the lock (replication is asynchronous); see
    ``docs/safety.md``. Use :class:`~redlease.Redlock` against independent servers for the
    latter.

    A handle may be shared by threads (tasks): they queue locally, each acquisition gets its
    own token. In threads only the thread that acquired may release; in asyncio the held
    handle is the handle's, and any task of its event loop may release it (as with
    ``asyncio.Lock``), so ``wait_for(lock.acquire(), 5)`` and ``gather`` work. Waiting
    forever for a lock the caller holds raises ``RuntimeError``: use :class:`RLock` for
    reentrancy.
    """

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        ttl: float = 10.0,
        timeout: float | None = None,
        prefix: str = "redlease",
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
        handoff: float = 0.25,
        fair: bool = True,
        wait_replicas: int = 0,
        wait_timeout: float = 1.0,
        wait_aof: bool = False,
    ) -> None:
        """Describe a lock; nothing is sent to Redis until :meth:`acquire`.

        :param client: your redis-py client (for a Sentinel master: ``sentinel.master_for()``).
        :param name: the lock's name (str or bytes); keys are ``<prefix>:{<name>}:...``.
        :param ttl: the lease in seconds (0 < ttl <= 30 days); renewed while held.
        :param timeout: how long ``with`` and ``acquire()`` wait: ``None`` or ``-1`` forever,
            ``0`` one try.
        :param prefix: the key prefix (no white space or braces).
        :param renew: renew the lease while held (the watchdog); ``False``: it ends after ttl.
        :param on_lost: called (from the watchdog) when a renewal finds the lock gone.
        :param handoff: seconds the next queued waiter has to claim the lock a release granted
            it (it holds the lock on a lease this short until its claim lands, which takes
            one round trip after it hears of it); a waiter that does not is skipped. A waiter
            whose process has died is skipped at once: its subscription is gone. One that
            joined the queue less than this before the grant is granted the releaser's lease
            instead, as if it had taken the lock itself.
        :param fair: ``True`` (default): waiters get the lock in the order they queued. ``False``
            (barging, Redisson's default): a release frees the lock and wakes the first
            waiter, and whoever comes first takes it, so a process that releases and
            re-acquires at once mostly keeps it: more acquisitions per second, less order. A
            waiter that has been first in line for its turn (10 ms; shorter when more than
            15 wait: 150 ms shared by the waiters) is then granted it at the next release, so
            nobody starves. Use the same ``fair`` for every handle of one name.
        :param wait_replicas: after taking the lock, wait until this many replicas
            acknowledged it (``WAIT``, on the connection that ran the acquire script); if fewer
            do within ``wait_timeout``, release it and raise
            :class:`~redlease.ReplicasUnavailable`. 0: do not wait.
        :param wait_timeout: seconds to wait for the replicas (0 < wait_timeout <= 60); an
            acquire may take that much longer than its ``timeout``.
        :param wait_aof: use ``WAITAOF`` instead (Redis / valkey >= 7.2; an older server
            raises :class:`~redlease.LockUnavailable`, never a silent ``WAIT``): the master
            and ``wait_replicas`` replicas must have fsynced the lock to their AOF.
        """
        check_client(client)
        if not isinstance(fair, bool):
            raise TypeError(f"fair must be a bool, got {type(fair).__name__}")
        self.fair = fair
        self._mode = FAIR if fair else BARGING
        self.wait_replicas = validate.replicas(wait_replicas)
        self.wait_timeout = validate.window_ms(wait_timeout, "wait_timeout") / 1000
        if not isinstance(wait_aof, bool):
            raise TypeError(f"wait_aof must be a bool, got {type(wait_aof).__name__}")
        self.wait_aof = wait_aof
        self._wait = (
            wait_command(wait_replicas, round(self.wait_timeout * 1000), wait_aof)
            if wait_replicas or wait_aof
            else None
        )
        super().__init__(
            name,
            ttl=ttl,
            timeout=timeout,
            prefix=prefix,
            renew=renew,
            on_lost=on_lost,
            handoff=handoff,
        )
        self._client = client
        self._channel_prefix: bytes | None = None

    # -- break-glass ------------------------------------------------------------------------
    @classmethod
    async def force_release(
        cls,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        token: str | bytes | None = None,
    ) -> ForceReleased:
        """Break-glass: evict whoever holds lock ``name`` (only a holder with ``token``, as
        ``inspect().held_by`` shows it, when given), move the fence on, and grant the lock to
        the first waiter at once, as a release does. For a ``Lock`` or ``RLock`` (a
        ``Redlock``'s servers must agree on a holder: not one of them on its own).

        For an operator (``redlease release NAME --force``), when a holder hangs on a lock it
        keeps renewing. The evicted holder's watchdog reports ``on_lost`` at its next renewal
        (within ``ttl / 3``); its fenced writes are refused once the next holder has written
        (the fence moved on: the next one is larger). Logged as a WARNING (``redlease_event``
        ``force_released``). Raises :class:`~redlease.LockUnavailable` if Redis fails.
        """
        return await force_release_lock(client, name, prefix=prefix, token=token, handoff=0.25)

    # -- state ------------------------------------------------------------------------------
    async def inspect(self) -> LockInfo:
        """A snapshot of the lock, read atomically in one round trip.

        Held? By this handle? The lease left, the last fence issued, the waiters. Raises
        :class:`~redlease.ForeignData` if one of the lock's keys holds data redlease did not
        write, :class:`~redlease.LockUnavailable` if Redis fails.
        """
        holding = self._held()
        return await self._inspect(b"" if holding is None else holding.token)

    async def locked(self) -> bool:
        """Whether anyone holds the lock now (one round trip)."""
        return (await self._inspect(b"")).held

    async def owned(self) -> bool:
        """Whether this handle's current acquisition still holds the lock (one round trip)."""
        holding = self._held()
        if holding is None:
            return False
        return (await self._inspect(holding.token)).mine

    async def remaining(self) -> float | None:
        """Seconds left on this handle's lease: ``None`` if it holds nothing, 0.0 if lost."""
        holding = self._held()
        if holding is None:
            return None
        info = await self._inspect(holding.token)
        return (info.remaining or 0.0) if info.mine else 0.0

    # -- hand-over --------------------------------------------------------------------------
    async def detach(self) -> str:
        """Stop owning the held lock without releasing it; the token that hands it over.

        The lease runs on in Redis (this handle no longer renews it, and is free again);
        :meth:`adopt` takes it over, in any process, before it runs out (within its ttl), once.
        The token is a plain JSON-safe str, and a capability: whoever adopts it first holds
        the lock.
        Raises :class:`~redlease.LockNotOwned` if the caller holds nothing through this handle,
        :class:`~redlease.LockLost` if the lease was already lost.
        """
        holding = await self._give_up()
        return handover.encode(
            handover.Handover(
                kind="lock",
                prefix=self._prefix,
                name=self.name,
                token=holding.token,
                fence=holding.fence,
                ttl_ms=holding.ttl_ms,
                fair=self.fair,
                handoff_ms=self._window_ms,
            )
        )

    @classmethod
    async def adopt(
        cls,
        client: redis.asyncio.Redis,
        token: str,
        *,
        ttl: float | None = None,
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
    ) -> AsyncLock:
        """Take over a lease that :meth:`detach` handed over: a handle that holds it.

        One script checks in Redis that the lease is still the token's, and swaps it for a
        fresh token of this handle's on a lease of ``ttl`` seconds (default: the ttl of the
        lock that detached it): a token is adopted once. The handle then owns it, with the
        fence the server issued to it (never the one written in the token), renewed by the
        watchdog (unless ``renew=False``) and released by :meth:`release` (``RLock.adopt``
        returns an ``RLock``). ``with Lock.adopt(client, token) as held:`` enters the adopted
        holding (it does not acquire again) and releases it at the end.

        Raises :class:`~redlease.AlreadyAdopted` if the token was adopted already and that
        adopter still holds the lease (a redelivered message: the two never hold it
        together), :class:`~redlease.LockLost` if the lease ran out or was taken, or its
        adopter released or lost it, ``ValueError`` naming ``token`` if it is not a lock's
        token (``TypeError`` if not a str), :class:`~redlease.LockUnavailable` if Redis
        failed.
        """
        found = handover.decode(token, "lock")
        lock = cls(
            client,
            found.name,
            ttl=found.ttl_ms / 1000 if ttl is None else ttl,
            prefix=found.prefix,
            renew=renew,
            on_lost=on_lost,
            handoff=found.handoff_ms / 1000,
            fair=found.fair,
        )
        await lock._adopt(found.token)
        return lock

    async def _adopt(self, detached: bytes) -> None:
        owner, holder = AsyncBackground.owner(), AsyncBackground.holder()
        await self._mutex.acquire(None)  # a new handle's: free
        token = new_token(name_of(owner))
        keys = handover.adopt_keys(self._keys, self._prefix, validate.name(self.name))
        args = handover.adopt_args(detached=detached, token=token, ttl_ms=self._ttl_ms)
        sent = time.monotonic()
        try:
            reply = handover.decode_adopt(await self._run(handover.ADOPT, keys, args, "adopt"))
        except BaseException:
            self._mutex.release()
            raise
        if reply.status != handover.ADOPTED:
            self._mutex.release()
            raise handover.refusal(reply, self.name)
        renewal = self._runtime().renewal
        holding = self._holding_for(owner, token, reply.value, sent + self.ttl, renewal, RENEW)
        holding.acquired_at = time.monotonic()
        self._hold(holding, holder)
        self._adopted = holding

    # -- the conversation with Redis --------------------------------------------------------
    async def acquire(self, blocking: bool = True, timeout: float | None = DEFAULT) -> bool:
        done, owner, holder, deadline, started = await self._enter(blocking, timeout)
        if done is not None:  # (the handle's checks and local mutex: re-entered, or not)
            return done
        try:
            holding = await self._acquire(owner, deadline)
            while holding is not None and holding.ran_out(time.monotonic()):
                _observe.lost(holding, "arrival")  # (see AsyncHandle.acquire)
                holding = None if past(deadline) else await self._acquire(owner, deadline)
        except BaseException as exc:
            self._failed(exc, locked=True)
            raise
        return self._entered(holding, holder, started)

    async def _release_remote(self, holding: Holding) -> None:
        keys, args = self._keys.in_order(), self._release_args(holding.token)
        if not int(await self._run(RELEASE, keys, args, "release")):
            holding.lost = True
            raise self._lost("was lost before release: its lease ran out or it was taken")

    acquire.__doc__ = AsyncHandle.acquire.__doc__

    async def _acquire(self, owner: Hashable, deadline: float | None) -> Holding | None:
        """Take the lock in Redis by ``deadline``: one try while nobody in this process waits
        on its hub (the uncontended path), else the waiting loop, driven from here."""
        runtime = self._runtime()
        hub = runtime.hub_for(self._keys.lock)
        token = new_token(name_of(owner))
        outcome: Outcome | None = None
        if not hub.subscribed or past(deadline):  # one round trip, nothing else
            outcome = await self._try(runtime, hub, owner, token, False, deadline)
            if outcome.result is not None:
                holding: Holding = outcome.result
                return holding
        return await self._wait_for_turn(runtime, hub, owner, token, deadline, outcome)

    async def _wait_for_turn(
        self,
        runtime: AsyncRuntime,
        hub: AsyncHub,
        owner: Hashable,
        token: bytes,
        deadline: float | None,
        outcome: Outcome | None,
    ) -> Holding | None:
        """Try, queue and sleep until the turn comes (an :class:`AsyncTurn`: it says what
        next after each try), then leave the queue unless it was granted."""
        grantee = None  # (with wait_replicas, a granted waiter claims in its try, then WAIT)
        if self._wait is None:  # how the hub completes this acquire should a release grant it
            claim = (CLAIM, [self._keys.lock], claim_args(token=token, ttl_ms=self._ttl_ms))
            template = self._holding_for(owner, token, 0, 0.0, runtime.renewal, RENEW)
            grantee = AsyncGrantee(claim, template)
        turn = AsyncTurn([hub], token, grantee, deadline=deadline, fallback=self.ttl)
        try:
            try:
                join = await turn.next(outcome)
                while join is not None:
                    outcome = await self._try(runtime, hub, owner, token, join, deadline)
                    join = await turn.next(outcome)
            except RedisError as exc:  # subscribing failed (a try raises LockUnavailable)
                raise self._unavailable("wait for", exc) from exc
            holding: Holding | None = turn.result
            return holding
        finally:
            if turn.close():
                left = budget(deadline, runtime.backend.socket_timeout, time.monotonic())
                if turn.gave_up:  # the answer is False only if Redis says we left
                    await self._leave(token, left)
                else:
                    await AsyncShield.cleanup(functools.partial(self._leave, token), left)

    async def _try(
        self,
        runtime: AsyncRuntime,
        hub: AsyncHub,
        owner: Hashable,
        token: bytes,
        join: bool,
        deadline: float | None,
    ) -> Outcome:
        """One try (``join``: if refused, queue up), with ``WAIT`` behind it if
        ``wait_replicas``: the holding, or what the refusal said. Should its reply be lost, or
        the caller cancelled, it is undone."""
        args = acquire_args(
            token=token,
            ttl_ms=self._ttl_ms,
            join=join,
            window_ms=self._window_ms,
            channels=self._channels(),
        )
        script, keys, wait = ACQUIRE[self._mode], self._keys.in_order(), self._wait
        acked: Any = None
        sent = time.monotonic()
        try:
            if wait is None:
                raw = await runtime.backend.run(script, keys, args)
            else:
                raw, acked = await runtime.backend.run_acknowledged(
                    script, keys, args, wait, self.wait_timeout
                )
        except BaseException as exc:
            error = await self._undo_after(
                exc, functools.partial(self._undo, token), "acquire", deadline
            )
            if error is None:
                raise
            raise error from exc
        reply = decode_acquire(raw)
        if reply.acquired:
            if wait is not None:
                await self._check_acknowledged(token, acked)
            ends = sent + self.ttl
            holding = self._holding_for(owner, token, reply.value, ends, runtime.renewal, RENEW)
            return Outcome(result=holding)
        if reply.server_ms is not None:
            hub.clock(reply.server_ms, time.monotonic())
        refusal = (0, reply.status == HELD, reply.value)
        return Outcome(refusals=(refusal,), answered=(0,), queued=(0,) if join else ())

    async def _leave(self, token: bytes, timeout: float | None) -> None:
        """Leave the queue (passing on a turn we were given)."""
        args = leave_args(
            token=token, window_ms=self._window_ms, channels=self._channels(), mode=self._mode
        )
        await self._run(LEAVE, self._keys.in_order(), args, "leave the queue of", timeout)

    async def _check_acknowledged(self, token: bytes, acked: Any) -> None:
        """Release the lock just taken and raise, unless enough replicas acknowledged it."""
        error = unacknowledged(
            self.name, acked, self.wait_aof, self.wait_replicas, self.wait_timeout
        )
        if error is None:
            return
        # The server answered: the release gets one reply's time (the socket timeout), as
        # any call does; the lock is not left to expire while nobody holds it.
        limit = self._runtime().backend.socket_timeout
        await AsyncShield.cleanup(functools.partial(self._undo, token), limit)
        raise error from (acked if isinstance(acked, Exception) else None)

    async def _undo(self, token: bytes, timeout: float | None) -> None:
        """Release an acquisition whose grant we may never have seen (quietly)."""
        await self._run(
            RELEASE, self._keys.in_order(), self._release_args(token), "release", timeout
        )

    async def _set_lease(self, holding: Holding, ttl_ms: int) -> None:
        sent = time.monotonic()
        extended = await self._run(EXTEND, [holding.key], [holding.token, ttl_ms], "extend")
        if not int(extended):
            raise self._mark_lost(holding)
        holding.extended(sent, ttl_ms)

    async def _inspect(self, token: bytes) -> LockInfo:
        raw = await self._run(INSPECT, self._keys.in_order(), [token], "inspect")
        return decode_inspect(raw, self.name, self._keys)

    def _release_args(self, token: bytes) -> list[Any]:
        """release.lua's ARGV for ``token`` (built by name in ``_core/lock.py``)."""
        return release_args(
            token=token,
            window_ms=self._window_ms,
            channels=self._channels(),
            mode=self._mode,
            lease_ms=self._ttl_ms,
        )

    def _channels(self) -> bytes:
        """The prefix of the channels the scripts tell waiters on (see ``runtime.channels``);
        it depends only on the lock's name and the kind of client, so it is computed once."""
        channels = self._channel_prefix
        if channels is None:
            channels = self._channel_prefix = self._runtime().channels(self._keys.lock)
        return channels


class AsyncRLock(AsyncLock):
    """A reentrant :class:`Lock`: the thread (task) that holds it may acquire it again.

    Re-entry refreshes the lease in one round trip (and raises :class:`~redlease.LockLost` if
    it was lost) and counts; the lock is released in Redis when the count drops to zero.
    Re-entry also works across separate ``RLock`` objects of the same name and client, like
    Redisson's RLock. The fencing token stays the one of the outermost acquisition.
    """

    _reentrant = True
