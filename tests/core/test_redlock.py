"""Redlock's arithmetic and bookkeeping (``_core/redlock.py``), on its own: no Redis."""

from __future__ import annotations

import pytest

from redlease._core import redlock as core
from redlease._core import redlock_argv
from redlease._core.holder import HolderInfo, decode
from redlease._core.lock import ACQUIRED, HELD, RESERVED, LockInfo
from redlease._core.waiters import WAITERS


@pytest.mark.parametrize(("n", "quorum"), [(1, 1), (2, 2), (3, 2), (4, 3), (5, 3), (7, 4)])
def test_quorum_is_a_strict_majority(n: int, quorum: int) -> None:
    assert core.quorum(n) == quorum


def test_validity_takes_off_elapsed_time_and_drift() -> None:
    # node-redlock's drift: ttl * factor + 2 ms
    assert core.drift_ms(10_000, 0.01) == 102
    assert core.validity(10_000, 0.5, 0.01) == pytest.approx(9.398)
    assert core.validity(10_000, 0.0, 0.0) == pytest.approx(9.998)
    assert core.validity(100, 0.2, 0.01) < 0  # a round slower than the lease holds nothing


def test_tally_sorts_replies_per_server() -> None:
    boom = ConnectionError("down")
    tally = core.tally([[ACQUIRED, 7], [ACQUIRED, 9], [HELD, 4000], [RESERVED, 30], boom])
    assert tally.granted == {0: 7, 1: 9}
    assert tally.lease_ms == [4000] and tally.reserved_ms == [30]
    assert tally.errors == {4: boom} and tally.answered == 4
    assert not tally.has_quorum  # 2 of 5
    assert tally.fence == 9  # the largest counter among the granting servers
    assert "only 4 of 5 servers answered (a quorum is 3): server 4: ConnectionError: down" in (
        tally.unavailable()
    )


def test_tally_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="acquire script"):
        core.tally([[9, 9]])


def test_failures_count_only_exceptions() -> None:
    boom = TimeoutError()
    assert core.failures([1, boom, 0]).errors == {1: boom}


def test_check_clients_wants_a_non_empty_sequence() -> None:
    assert core.check_clients((1, 2, 3)) == [1, 2, 3]
    assert core.check_clients((1, 2), allow_small_quorum=True) == [1, 2]
    with pytest.raises(ValueError, match=r"2 server\(s\).*allow_small_quorum=True"):
        core.check_clients((1, 2))
    with pytest.raises(TypeError, match="clients must be a sequence"):
        core.check_clients("abc")
    with pytest.raises(ValueError, match="clients must not be empty"):
        core.check_clients([])


def test_one_server_twice_is_refused_by_run_id_whatever_the_db() -> None:
    core.check_distinct({0: ("a", 0), 1: ("b", 0), 2: ("c", 0)})
    with pytest.raises(ValueError, match=r"clients\[2\] is the same server as clients\[0\]"):
        core.check_distinct({0: ("a", 0), 1: ("b", 0), 2: ("a", 0)})
    with pytest.raises(ValueError, match=r"clients\[1\] .* clients\[0\] .*db 0 and db 1"):
        core.check_distinct({0: ("a", 0), 1: ("a", 1)})


@pytest.mark.parametrize(
    ("value", "error"), [(-0.1, ValueError), (0.5, ValueError), ("x", TypeError)]
)
def test_drift_factor_bounds(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match="drift_factor"):
        core.check_drift_factor(value)


def test_a_grant_without_a_counter_does_not_count_toward_the_fence() -> None:
    from redlease._core.redlock import Tally

    # 3 granted, one of them without a counter (restarted empty): not enough
    t = Tally(n=5, granted={2: 0, 3: 7, 4: 7})
    assert t.has_quorum and not t.fence_known and t.fresh == [2]
    assert "1 of them have no fencing counter" in t.fence_unknown()
    # 4 granted, 3 with counters: the fence is theirs
    t = Tally(n=5, granted={1: 9, 2: 0, 3: 7, 4: 7})
    assert t.fence_known and t.fence == 9
    # a name used nowhere yet: every answer a grant without a counter
    t = Tally(n=5, granted={0: 0, 1: 0, 2: 0}, errors={3: TimeoutError(), 4: TimeoutError()})
    assert t.fence_known and t.fence == 1
    # ... but not when a server refused (it may have the counter)
    t = Tally(n=5, granted={0: 0, 1: 0, 2: 0, 3: 0}, lease_ms=[100])
    assert not t.fence_known


def test_an_acquire_round_waits_for_grants_with_counters() -> None:
    from redlease._core.redlock import acquire_settled

    assert not acquire_settled([[1, 0], [1, 5], [1, 5], None, None])
    assert acquire_settled([[1, 0], [1, 5], [1, 5], [1, 5], None])
    assert acquire_settled([[1, 0], [1, 5], [1, 5], [0, 10, 1], [0, 10, 1]])


def test_a_late_server_needs_the_fence_only_where_it_granted_with_another_counter() -> None:
    assert not core.needs_fence([ACQUIRED, 7], 7)  # the counters moved together: nothing
    assert core.needs_fence([ACQUIRED, 0], 7)  # restarted empty: the write-back creates it
    assert core.needs_fence([ACQUIRED, 5], 7)  # lagging
    assert not core.needs_fence([HELD, 900, 1], 7)  # not ours there: fence.lua does nothing
    assert not core.needs_fence([RESERVED, 50, 1], 7)
    assert not core.needs_fence(TimeoutError("late"), 7)


def test_a_waiter_watches_a_reservation_only_from_right_behind_the_head() -> None:
    """acquire_reserving.lua's rank: right behind the reserved head (1), at it (0), not queued
    (-1) or an older script without a rank: watch the reservation's end; further back (2+): not (the
    one ahead watches), but the refusal still counts as contention."""
    replies = [
        [RESERVED, 30, 0, 1],
        [RESERVED, 40, 0, 2],
        [RESERVED, 50, 0, -1],
        [RESERVED, 60, 0],
        [RESERVED, 70, 0, 5],
    ]
    tally = core.tally(replies)
    assert tally.check_ms == [30, 50, 60]
    assert tally.reserved_ms == [30, 40, 50, 60, 70]
    far = core.tally([[RESERVED, 40, 0, 2]] * 3)
    assert far.check_ms == [] and far.reserved_ms == [40] * 3 and not far.fence_known


def test_merge_inspect_names_the_holder_of_a_majority() -> None:
    a, b = decode(b"p.r.h:1:A", 0), decode(b"p.s.h:2:B", 0)

    def info(
        holder: HolderInfo | None, left: float | None, fence: int, mine: bool = False
    ) -> LockInfo:
        held = holder is not None
        return LockInfo("n", held, mine, left, fence, 1, holder, int(held))

    merged = core.merge_inspect(
        "n", [info(a, 5.0, 7, True), info(a, 4.0, 6, True), info(b, 9, 3)], 2
    )
    assert (merged.held, merged.mine, merged.held_by, merged.servers) == (True, True, a, 2)
    assert (merged.remaining, merged.fence, merged.waiters) == (4.0, 7, 1)
    split = core.merge_inspect("n", [info(a, 5.0, 7), info(b, 4.0, 6), info(None, None, 6)], 2)
    assert not split.held and split.servers == 1 and split.remaining is None
    assert core.merge_inspect("n", [], 2) == LockInfo("n", False, False, None, 0, 0, None, 0)


def test_a_fence_no_server_remembers_is_the_latest_server_time() -> None:
    """Every granting server lost the counter (or never had it): the merged fence is the
    latest of the times they sent, so it does not go back to 1 after they all lost it."""
    fresh = core.tally([[1, 0, 1_700_000_000_000_001], [1, 0, 1_700_000_000_000_009], [1, 0, 7]])
    assert fresh.fence_known and fresh.fence == 1_700_000_000_000_009
    twin = core.tally([[1, 0], [1, 0], [1, 0]])  # the replies before: no time in them
    assert twin.fence_known and twin.fence == 1


def test_an_attempt_that_won_is_queued_only_where_it_neither_was_granted_nor_left() -> None:
    tally = core.tally([[ACQUIRED, 7], [ACQUIRED, 7], [ACQUIRED, 7], [HELD, 10, 1], boom()])
    tally.left.add(4)  # a leave went behind its late acquire
    won = core.outcome(tally, "holding", join=True)
    assert won.result == "holding" and won.queued == (3,)
    assert core.outcome(tally, "holding", join=False).queued == ()


def test_an_attempt_that_lost_reports_refusals_of_the_servers_that_answered() -> None:
    tally = core.tally([[ACQUIRED, 7], [HELD, 900, 1], [RESERVED, 30, 0, 1], boom(), boom()])
    lost = core.outcome(tally, None, join=True)
    assert lost.result is None and lost.split  # one grant: a split vote
    assert lost.answered == (0, 1, 2) and lost.queued == (0, 1, 2, 3, 4)
    assert lost.refusals == tuple(
        (i, held, ms) for i in (0, 1, 2) for held, ms in ((True, 900), (False, 30))
    )


def test_a_renewal_counts_with_a_majority_within_its_validity() -> None:
    answered = [[True, True], [True, False], [True, False]]
    assert core.renewed(answered, [10_000, 10_000], 0.01, 2, 0.01) == [True, False]
    assert core.renewed(answered, [100, 10_000], 0.2, 2, 0.01) == [False, False]


def test_the_lease_a_majority_still_has_less_the_drift() -> None:
    assert core.majority_remaining([900.0, 500.0, 700.0], 3, 2) == pytest.approx(0.498)
    assert core.majority_remaining([900.0, 500.0], 3, 2) == 0.0  # fewer than a majority
    assert core.majority_remaining([1.0, 1.0, 1.0], 3, 2) == 0.0


def test_the_lock_scripts_argv_follows_their_contracts() -> None:
    """acquire_reserving.lua / release.lua / leave.lua ARGV as their headers number them."""
    acquire = redlock_argv.acquire(token=b"t", ttl_ms=10, join=True, window_ms=50, ticket="7")
    assert acquire.told == [b"t", 10, 1, 50, WAITERS, "7", "1"]
    assert acquire.quiet == [b"t", 10, 1, 50, WAITERS, "7", "0"]
    release = redlock_argv.release(token=b"t", window_ms=50)
    assert release.told == [b"t", 50, WAITERS, b"R", 0, "1", 0, "", 0]
    assert release.quiet[5] == "0"
    requeue = redlock_argv.requeue("7", 10)
    requeued = redlock_argv.release(token=b"t", window_ms=50, requeue=requeue)
    assert requeued.told[6:] == [0, "7 10", 0]
    leave = redlock_argv.leave(token=b"t", window_ms=50)
    assert leave.told == release.told[:7] and leave.quiet == release.quiet[:7]


def boom() -> Exception:
    return TimeoutError("late")
