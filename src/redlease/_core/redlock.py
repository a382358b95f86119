"""Redlock arithmetic and bookkeeping: quorum, validity, fence merging, client checks.

The algorithm (Redis documentation, "Distributed Locks with Redis"), as redlease runs it:

1. note the start (monotonic clock);
2. run acquire_reserving.lua with one token on all N servers at once, each with its own
   deadline;
3. held only if a majority granted and ``validity = ttl - elapsed - drift`` is positive, where
   ``drift = ttl * drift_factor + 2 ms``;
   The round returns as soon as a majority granted (or can no longer grant); the replies of
   the rest are collected later, off the caller's path (``_fanout/``);
4. the fence is the largest counter among the granting servers, written back to them
   (fence.lua) before the acquire counts: every later majority meets one of them (skipped
   where they all issued it: acquire_reserving.lua issues whole seconds, so servers whose counters
   agree issue the same fence);
5. otherwise release on every server, including those that did not answer (their reply may
   have been lost): where the reply is late, behind the acquire on its own connection, so
   the server runs the release after the acquire however late that comes (a late grant is
   always undone); then wait for a release message or the lease end, and try again.

A release also returns at a majority released (the rest have been sent; each deletes only
this token). Only :func:`tellers` of the N servers publish the wake-up of the next waiter:
a release counts only if a majority released, and the N - tellers quiet servers are fewer
than a majority, so every release that counts was told by at least one server; the waiter
wakes on one message and then asks every server. The same for an acquire's word to the
next waiter that the lock was taken, and for how long (acquire_reserving.lua ``tell``): an
acquisition counts only with a majority of grants, so one of them is a teller's.

Waiters queue on every server with the same ticket as score, so all servers agree on who is
next and a release reserves the same waiter everywhere: no split votes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .lock import ACQUIRED, HELD, LockInfo, decode_acquire
from .waiters import Outcome

__all__ = [
    "MIN_SERVERS",
    "Tally",
    "acquire_settled",
    "check_clients",
    "check_distinct",
    "check_drift_factor",
    "dequeued",
    "done",
    "drift_ms",
    "failures",
    "majority_done",
    "majority_remaining",
    "merge_inspect",
    "needs_fence",
    "outcome",
    "quorum",
    "renewed",
    "tally",
    "tellers",
    "validity",
]


def quorum(n: int) -> int:
    """The majority of ``n`` servers."""
    return n // 2 + 1


def tellers(n: int) -> int:
    """How many of ``n`` servers publish a release's wake-up (the first ones): ``n - quorum
    + 1``, so that the quiet ones are fewer than a majority."""
    return n - quorum(n) + 1


def _granted(reply: Any) -> bool:
    return isinstance(reply, list) and bool(reply) and int(reply[0]) == ACQUIRED


def _answers(replies: list[Any]) -> int:
    return sum(1 for r in replies if r is not None and not isinstance(r, BaseException))


def acquire_settled(replies: list[Any]) -> bool:
    """Whether an acquire round over all servers may stop reading: a majority granted, or
    so many refused that a majority can no longer grant. ``None``: no reply yet. Failures do
    not settle it: whether the others answer decides contention (False) from an outage."""
    n = len(replies)
    counted = refused = missing = 0  # (one pass: this runs after every reply)
    for r in replies:
        if r is None:
            missing += 1
        elif _granted(r):
            # counted: that server has the name's fencing counter (see Tally.fresh)
            counted += len(r) > 1 and int(r[1]) > 0
        elif not isinstance(r, BaseException):
            refused += 1
    majority = quorum(n)
    return (
        counted >= majority  # (a grant without a counter waits for more: Tally.fence_known)
        or refused > n - majority
        or not missing
    )


def needs_fence(reply: Any, fence: int) -> bool:
    """Whether a server whose acquire reply came late needs the merged ``fence`` written back:
    it granted, and its counter is not the fence (none: restarted empty; or lagging). Where it
    refused (or failed), the lock is not ours there, and fence.lua would do nothing."""
    return _granted(reply) and len(reply) > 1 and int(reply[1]) != fence


def dequeued(reply: Any) -> bool:
    """Whether an acquire reply took the caller out of that server's queue: a grant always
    does (acquire_reserving.lua dequeues the token it grants the lock to); a refusal leaves
    it queued."""
    return _granted(reply)


def majority_done(replies: list[Any]) -> bool:
    """Whether a release (or any 1-for-done script) round may stop reading: a majority did
    it, or so many answered that they did not that a majority cannot (failures do not
    settle it, as in :func:`acquire_settled`). ``None``: no reply yet."""
    n = len(replies)
    count = sum(1 for r in replies if done(r))
    return count >= quorum(n) or _answers(replies) - count > n - quorum(n)


def done(reply: Any) -> bool:
    """Whether a 1-for-done script's reply (or the exception in its place) says it did it."""
    return isinstance(reply, int) and reply == 1


def drift_ms(ttl_ms: int, drift_factor: float) -> float:
    """The clock drift allowance of a lease: ``ttl * drift_factor + 2 ms`` (node-redlock's)."""
    return ttl_ms * drift_factor + 2


def validity(ttl_ms: int, elapsed: float, drift_factor: float) -> float:
    """Seconds the lock is known to be valid after ``elapsed`` seconds of acquiring."""
    return (ttl_ms - elapsed * 1000 - drift_ms(ttl_ms, drift_factor)) / 1000


def majority_remaining(mine_ms: list[float], quorum: int, allowance_ms: float) -> float:
    """Seconds a majority still holds a lease, less the drift ``allowance_ms``, from what
    each server holding it reported (``mine_ms``, ms left); 0.0 if fewer than ``quorum``."""
    if len(mine_ms) < quorum:
        return 0.0
    majority_ms = sorted(mine_ms, reverse=True)[quorum - 1]
    return max(0.0, (majority_ms - allowance_ms) / 1000)


def renewed(
    answered: list[list[bool]],
    ttls_ms: list[int],
    elapsed: float,
    quorum: int,
    drift_factor: float,
) -> list[bool]:
    """Per holding of a renewal batch (its lease ``ttls_ms``): renewed on a majority of the
    servers (``answered``: each answering server's per-holding results) within its validity,
    the round having taken ``elapsed`` seconds."""
    return [
        sum(1 for server in answered if server[j]) >= quorum
        and validity(ttl_ms, elapsed, drift_factor) > 0
        for j, ttl_ms in enumerate(ttls_ms)
    ]


@dataclass
class Tally:
    """The replies of one round over N servers."""

    n: int
    granted: dict[int, int] = field(default_factory=dict)  # server -> its fence counter
    # The latest server time (us) among granting servers without a counter: the merged
    # fence is at least this, so that it does not go back to 1 when they all lost it.
    floor: int = 0
    lease_ms: list[int] = field(default_factory=list)  # pttl reported where held by another
    reserved_ms: list[int] = field(default_factory=list)  # reservation left where reserved
    # The reservations this waiter must watch: where it is next in line behind the reserved
    # head (or its place is unknown). Further back, the one ahead of it watches (see
    # acquire_reserving.lua's rank), so a waiter further back spends no round on it.
    check_ms: list[int] = field(default_factory=list)
    errors: dict[int, BaseException] = field(default_factory=dict)
    # Servers whose queue the caller has left already: a leave was sent behind a late acquire,
    # or the late acquire's reply came and granted (see dequeued).
    left: set[int] = field(default_factory=set)

    @property
    def answered(self) -> int:
        return self.n - len(self.errors)

    @property
    def has_quorum(self) -> bool:
        return len(self.granted) >= quorum(self.n)

    @property
    def fresh(self) -> list[int]:
        """Granting servers without a fencing counter for the name: never used there, or the
        server lost its data (restarted empty). Their counter is not created by the acquire:
        only the write-back of a merged fence creates it (fence.lua)."""
        return [i for i, counter in self.granted.items() if counter == 0]

    @property
    def fence_known(self) -> bool:
        """Whether the merged fence is surely above every fence issued before.

        Every issued fence was written back to a majority. A server that lost its data since
        has no counter any more (it is *fresh*); one that kept it has at least that fence. So
        a majority of granting servers *with* a counter meets a server that has the last fence
        (any two majorities share a server). A fresh server does not count: had it counted,
        one restart-empty plus two servers that missed a write-back (down, hung, slow) would
        make a majority that knows nothing of the last fence, and issue it again. The one
        exception is a name used nowhere yet: every server that answered granted and is fresh.
        """
        counted = len(self.granted) - len(self.fresh)
        if counted >= quorum(self.n):
            return True
        return counted == 0 and self.has_quorum and not self.lease_ms and not self.reserved_ms

    @property
    def fence(self) -> int:
        """The merged fence: the largest counter among the granting servers, and at least
        the latest server time (us) of those without one (for a name used nowhere yet, or
        forgotten by every server that answered)."""
        return max(max(self.granted.values()), self.floor, 1)

    def fence_unknown(self) -> str:
        """Why a majority granted but the fence cannot be trusted (``not fence_known``)."""
        return (
            f"{len(self.granted)} of {self.n} servers granted it, but {len(self.fresh)} of them "
            "have no fencing counter for it (restarted empty, or never used), which leaves "
            f"fewer than a quorum ({quorum(self.n)}) that remember the last fence issued"
        )

    def unavailable(self) -> str:
        """Why fewer than a quorum of servers answered."""
        reasons = "; ".join(
            f"server {i}: {type(e).__name__}: {e}" for i, e in sorted(self.errors.items())
        )
        return (
            f"only {self.answered} of {self.n} servers answered (a quorum is {quorum(self.n)}): "
            f"{reasons}"
        )


def failures(results: Sequence[Any]) -> Tally:
    """A Tally of only which servers failed (replies of scripts other than acquire)."""
    return Tally(
        n=len(results),
        errors={i: r for i, r in enumerate(results) if isinstance(r, BaseException)},
    )


def tally(results: Sequence[Any]) -> Tally:
    """Sort acquire_reserving.lua replies (or the exceptions raised instead) per server."""
    out = Tally(n=len(results))
    for i, result in enumerate(results):
        if isinstance(result, BaseException):
            out.errors[i] = result
            continue
        reply = decode_acquire(result)
        if reply.status == ACQUIRED:
            out.granted[i] = reply.value
            if reply.value == 0 and len(result) > 2:  # acquire_reserving.lua's {1, 0, server us}
                out.floor = max(out.floor, int(result[2]))
        elif reply.status == HELD:
            out.lease_ms.append(reply.value)
        else:
            out.reserved_ms.append(reply.value)
            if not _far_back(result):
                out.check_ms.append(reply.value)
    return out


def outcome(tally: Tally, result: Any, *, join: bool) -> Outcome:
    """What an attempt round tells the waiting loop: ``result`` (a holding) when it won;
    else who refused, for how long, who answered. ``join``: the round queued the caller
    wherever it was refused (it must leave those queues if it stops waiting)."""
    n = tally.n
    if result is not None:
        # (granted: it left that queue; left: a leave was sent behind the late acquire)
        stay = set(tally.granted) | tally.left
        queued = tuple(i for i in range(n) if i not in stay) if join else ()
        return Outcome(result=result, queued=queued)
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


def _far_back(reply: Any) -> bool:
    """Whether a reservation refusal says the caller is queued behind the next waiter (rank
    2 or more: someone ahead of it checks on the reserved head)."""
    try:
        return int(reply[3]) >= 2
    except (TypeError, ValueError, IndexError):  # an older script: no rank, watch it
        return False


MIN_SERVERS = 3
"""The fewest servers a Redlock survives one failure with (a majority of 3 is 2)."""


def check_clients(candidates: Any, *, allow_small_quorum: bool = False) -> list[Any]:
    """Refuse a non-sequence, an empty one, and fewer than 3 servers unless allowed.

    Each client's kind is the shell's to check.
    """
    if not isinstance(allow_small_quorum, bool):
        raise TypeError(
            f"allow_small_quorum must be a bool, got {type(allow_small_quorum).__name__}"
        )
    if isinstance(candidates, (str, bytes)) or not hasattr(candidates, "__iter__"):
        raise TypeError(f"clients must be a sequence of clients, got {type(candidates).__name__}")
    clients: list[Any] = list(candidates)
    if not clients:
        raise ValueError("clients must not be empty: Redlock needs at least one server")
    if len(clients) < MIN_SERVERS and not allow_small_quorum:
        raise ValueError(
            f"clients has {len(clients)} server(s): a Redlock over fewer than {MIN_SERVERS} "
            "survives no server failing (use Lock for one server); pass "
            "allow_small_quorum=True if that is what you want"
        )
    return clients


def check_distinct(identities: dict[int, tuple[str, int]]) -> None:
    """Refuse one server given twice: ``identities`` maps a client's index to the
    ``(run_id, db)`` its server reported.

    Two databases of one server are the same server: they fail together, so counting them
    as two votes would fake a quorum just as well.
    """
    seen: dict[str, int] = {}
    for i in sorted(identities):
        run_id, db = identities[i]
        if run_id in seen:
            j = seen[run_id]
            raise ValueError(
                f"clients[{i}] is the same server as clients[{j}] (run_id {run_id}, db "
                f"{identities[j][1]} and db {db}): one server twice would fake a quorum"
            )
        seen[run_id] = i


def check_drift_factor(value: Any) -> float:
    """``drift_factor`` must be a number in [0, 0.5)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"drift_factor must be a number, got {type(value).__name__}")
    if not 0 <= value < 0.5:
        raise ValueError(f"drift_factor must be >= 0 and < 0.5, got {value!r}")
    return float(value)


def merge_inspect(name: str | bytes, infos: Sequence[LockInfo], quorum: int) -> LockInfo:
    """One :class:`LockInfo` of a Redlock from what each answering server reported.

    ``held_by``: the holder most servers report, and ``servers`` how many (held: a majority);
    ``remaining``: the lease a majority of them still has; ``mine``: a majority holds it with
    the asked token; ``fence`` and ``waiters``: the largest reported (the fence a next holder
    exceeds; the queues agree up to the waiters a server missed).
    """
    counts: dict[str, list[LockInfo]] = {}
    for info in infos:
        if info.held_by is not None:
            counts.setdefault(info.held_by.token, []).append(info)
    holders = max(counts.values(), key=len, default=[])
    held = len(holders) >= quorum
    left = sorted((i.remaining for i in holders if i.remaining is not None), reverse=True)
    return LockInfo(
        name=name,
        held=held,
        mine=sum(1 for i in infos if i.mine) >= quorum,
        remaining=left[quorum - 1] if held and len(left) >= quorum else None,
        fence=max((i.fence for i in infos), default=0),
        waiters=max((i.waiters for i in infos), default=0),
        held_by=max(holders, key=lambda i: i.fence).held_by if holders else None,
        servers=len(holders),
    )
