"""Election: one leader at a time, with a strictly increasing term, a lease and watchers."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable

import redis.asyncio

from .._core import shared, validate
from .._core.breakglass import ForceReleased
from .._core.election import (
    WATCH,
    ElectionInfo,
    Leader,
    decode_watch,
    election_info,
    election_keys,
    leader_of,
)
from .._core.lease import new_token
from .._core.waiters import Outcome
from ..errors import ElectionUnavailable, LeadershipLost, NotLeader
from .shared import AsyncShared, Errors

__all__ = ["AsyncElection"]


class AsyncElection(AsyncShared):
    """Leader election on one Redis server: at most one leader at a time, each with a term.

    ``campaign(value)`` blocks until this handle leads (candidates are served in FIFO order,
    woken by pub/sub); the leadership is a lease of ``ttl`` seconds renewed by the watchdog,
    so a dead leader is replaced within ``ttl``. ``resign()`` steps down at once.
    Guaranteed, while the server keeps its data and clocks run at a sane rate:

    * at most one leader holds the lease at any time;
    * ``term`` strictly increases over the successive leaders of a name (a fencing token:
      pass it to your storage and reject older ones, so a paused ex-leader cannot act);
    * a leader that loses its lease is told: ``on_lost`` runs (from the watchdog) and
      ``resign()`` raises :class:`~redlease.LeadershipLost`;
    * :meth:`observe` yields every change of leader without polling, also a term that began
      and ended between two looks (the latest, if several did); a Redis failure raises
      :class:`~redlease.ElectionUnavailable`.

    A process paused longer than the ttl (GC, SIGSTOP) may still believe it leads until its
    watchdog runs again: only the term protects the data it writes meanwhile.
    """

    _unavailable_error = ElectionUnavailable
    _what = "election"
    _errors = Errors(NotLeader, LeadershipLost)

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        ttl: float = 10.0,
        prefix: str = "redlease",
        renew: bool = True,
        on_lost: Callable[[], object] | None = None,
        handoff: float = 0.05,
    ) -> None:
        """Describe an election; nothing is sent to Redis until it is used.

        :param client: your redis-py client.
        :param name: the election's name (str or bytes); keys are
            ``<prefix>:{<name>}:election:...``.
        :param ttl: the leader's lease in seconds; renewed while it leads.
        :param prefix: the key prefix (no white space or braces).
        :param renew: renew the lease while leading; ``False``: it ends after ttl.
        :param on_lost: called (from the watchdog) when a renewal finds the lease gone.
        :param handoff: seconds the freed leadership stays reserved for the next candidate
            before it is skipped as dead.
        """
        super().__init__(
            client,
            name,
            ttl=ttl,
            timeout=None,
            renew=renew,
            on_lost=on_lost,
            handoff=handoff,
            keys=election_keys(validate.prefix(prefix), validate.name(name)),
        )
        self.value: str | None = None

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} ttl={self.ttl} term={self.term}>"

    @classmethod
    async def force_release(
        cls,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        token: str | bytes | None = None,
    ) -> ForceReleased:
        """Break-glass: end the leader's term (only if ``token``, as ``inspect().held_by``
        shows it, leads, when given), move the fence on and wake the next candidate.

        For an operator (``redlease release NAME --force``): the evicted holder's watchdog
        reports ``on_lost`` at its next renewal, and its fenced writes are refused once the
        next holder has written. Logged as a WARNING (``redlease_event`` ``force_released``).
        Raises :class:`~redlease.ElectionUnavailable` if Redis fails.
        """
        return await cls(client, name, prefix=prefix)._force_release(token, "election")

    @property
    def term(self) -> int | None:
        """The term of this handle's leadership (``None`` when it does not lead)."""
        return self.fence

    async def campaign(self, value: str, timeout: float | None = None) -> bool:
        """Block until this handle leads; True, or False when ``timeout`` seconds passed.

        ``value`` (str) is what :meth:`leader` reports while this handle leads, e.g. its
        address. ``timeout``: ``None`` or ``-1`` waits forever, ``0`` tries once. The calling
        thread owns the leadership and :meth:`resign` must come from it (asyncio: this handle
        owns it, and any task of its event loop may resign).
        """
        if not isinstance(value, str):
            raise TypeError(f"value must be str, got {type(value).__name__}")
        self._forget_lost()
        if self._mine() is not None:
            raise RuntimeError(f"election {self.name!r}: this handle leads already")
        _, deadline = self._deadline(True, timeout)
        holding = await self._take(deadline, value=value.encode())
        if holding is None:
            return False
        self.value = value
        return True

    async def resign(self) -> None:
        """Step down; the next candidate is woken at once.

        Raises :class:`~redlease.NotLeader` if this handle does not lead,
        :class:`~redlease.LeadershipLost` if its lease ran out first.
        """
        try:
            await self._give("resign from")
        finally:
            if self._mine() is None:
                self.value = None

    async def leading(self) -> bool:
        """Whether this handle still holds the leadership (one round trip)."""
        return await self.owned()

    async def leader(self) -> Leader | None:
        """The current leader, ``Leader(value, term)``, or ``None`` (one round trip)."""
        return leader_of(await self._snapshot())

    async def inspect(self) -> ElectionInfo:
        """A snapshot: leader and term, its lease left, candidates queued, the last term."""
        holding = self._mine()
        return election_info(
            await self._snapshot(b"" if holding is None else holding.token), self.name
        )

    async def observe(self, timeout: float | None = None) -> AsyncIterator[Leader | None]:
        """Yield the leader now, then each time it changes (``None``: nobody leads).

        A term that began and ended before this loop looked again is yielded too, then
        ``None``; of several such terms in a row, the latest. Woken by pub/sub, no polling.
        Stops after ``timeout`` seconds without a change (``None``: never; break out of the
        loop to stop).
        """
        limit = validate.timeout(timeout)
        known, seen = -1, 0  # the term last yielded (0: nobody), the highest term told of
        while True:
            deadline = None if limit is None else time.monotonic() + limit
            found = await self._watch(known, seen, deadline)
            if found is None:
                return
            leader, latest = found
            known = 0 if leader is None else leader.term
            seen = max(seen, latest, known)
            yield leader

    async def _watch(
        self, known: int, seen: int, deadline: float | None
    ) -> tuple[Leader | None, int] | None:
        token = new_token()
        keep = 3 * self._ttl_ms + 10 * self._window_ms

        async def attempt(join: bool) -> Outcome:
            args = [token, int(join), known, self._channels(), keep, seen]
            raw = await self._run(WATCH, self._keys.in_order(), args, "watch")
            changed, leader, ms = decode_watch(raw)
            if changed:
                return Outcome(result=(leader, ms))
            return Outcome(refusals=((0, True, ms),), answered=(0,), queued=(0,) if join else ())

        async def leave(servers: list[int], timeout: float | None) -> None:
            await self._run(shared.LEAVE, *self._queue_args(token), "stop watching", timeout)

        hub = self._runtime().hub_for(self._keys.holders)
        found: tuple[Leader | None, int] | None = await self._wait_turn(
            hub, token, attempt, leave, deadline=deadline, fallback=self.ttl
        )
        return found
