"""The pure core, without Redis: validation, keys, reply decoding, schedules, the waiter table."""

from __future__ import annotations

import gc
import math
from typing import Any

import pytest

from redlease._core import validate
from redlease._core.lease import Holding, new_token
from redlease._core.lock import LockKeys, decode_acquire
from redlease._core.renewals import RenewSchedule
from redlease._core.waiters import Action, WaiterTable


def test_keys_share_one_hash_tag() -> None:
    keys = LockKeys.build("app", b"orders:42")
    for key in (keys.lock, keys.fence, keys.queue, keys.handoff):
        assert key.startswith(b"app:{orders:42}:")


@pytest.mark.parametrize(
    ("value", "expected"),
    [(10, 10_000), (0.0004, 1), (2.5, 2500), (30 * 24 * 3600, 30 * 24 * 3600 * 1000)],
)
def test_ttl_in_ms(value: float, expected: int) -> None:
    assert validate.ttl_ms(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"), [(None, None), (-1, None), (math.inf, None), (0, 0.0), (2, 2.0)]
)
def test_timeout_forms(value: Any, expected: Any) -> None:
    assert validate.timeout(value) == expected


def test_tokens_are_random_and_long() -> None:
    tokens = {new_token() for _ in range(1000)}
    assert len(tokens) == 1000
    process, _random = next(iter(tokens)).split(b".")
    assert all(t.startswith(process + b".") for t in tokens)  # the process' channel id
    assert all(len(t) == len(process) + 1 + 32 for t in tokens)  # and 128 random bits


def test_decode_acquire_refuses_nonsense() -> None:
    assert decode_acquire([1, 7]).acquired
    assert decode_acquire([b"0", b"100"]).value == 100
    for raw in (None, [], [5, 1], ["x", 1]):
        with pytest.raises(ValueError, match=r"acquire\.lua"):
            decode_acquire(raw)


def holding(ttl_ms: int = 3000, key: bytes = b"k") -> Holding:
    return Holding(key=key, token=b"t", fence=1, owner=1, ttl_ms=ttl_ms, expires_at=100.0)


def test_renewals_come_every_third_of_the_lease_and_batch() -> None:
    schedule = RenewSchedule(batch=2)
    a, b, c = holding(3000, b"a"), holding(3000, b"b"), holding(30_000, b"c")
    for h in (a, b, c):
        schedule.add(h, now=0.0)
    assert schedule.next_due() == 1.0
    assert schedule.take_due(0.5) == []
    assert schedule.take_due(1.0) == [a, b]  # due together, one batch
    schedule.discard(a)
    schedule.discard(b)
    assert schedule.next_due() == 10.0


def test_renewals_forget_released_lost_and_dropped_holdings() -> None:
    schedule = RenewSchedule()
    kept, released, lost = holding(), holding(), holding()
    for h in (kept, released, lost):
        schedule.add(h, now=0.0)
    released.released = True
    lost.lost = True
    dropped = holding()
    schedule.add(dropped, now=0.0)
    del dropped
    gc.collect()
    assert schedule.take_due(5.0) == [kept]
    assert schedule.expired(100.0) == [kept]


def test_mark_lost_returns_the_callback_once() -> None:
    calls: list[int] = []
    h = holding()
    h.on_lost = lambda: calls.append(1)
    assert h.mark_lost() is h.on_lost
    assert h.mark_lost() is None  # already lost


class TestWaiterTable:
    def table(self) -> tuple[WaiterTable, Any, Any]:
        table = WaiterTable()
        return table, table.add(b"p.t1", object()), table.add(b"p.t2", object())

    def test_a_reservation_wakes_exactly_the_reserved_waiter(self) -> None:
        table, first, second = self.table()
        assert table.on_message(b"Hp.t2 50", now=0.0) == [second]
        assert not first.woken
        assert WaiterTable.plan(second, None, 0.0, fallback=10.0) == (Action.ATTEMPT, None)
        assert table.on_message(b"Hsomeone.else 50", now=0.0) == []

    def test_next_in_line_checks_when_the_heads_turn_lapses(self) -> None:
        table, first, _ = self.table()
        assert table.on_message(b"Np.t1 50", now=0.0) == []  # no thread is woken for it
        assert table.next_check() == pytest.approx(0.052)
        assert table.due(0.04) == []
        assert table.due(0.06) == [first]
        assert WaiterTable.plan(first, None, 0.06, fallback=10.0)[0] is Action.ATTEMPT

    def test_taken_cancels_the_check_and_sets_the_lease(self) -> None:
        table, first, _ = self.table()
        table.on_message(b"Np.t1 50", now=0.0)
        assert table.on_message(b"Tp.t1 10000", now=0.01) == []
        assert table.next_check() is None
        action, wait = WaiterTable.plan(first, None, 0.06, fallback=60.0)
        assert action is Action.WAIT and wait == pytest.approx(9.952)

    def test_refusal_sets_the_retry_at_lease_end(self) -> None:
        _table, first, _ = self.table()
        WaiterTable.refused(first, True, 2000, now=0.0)
        assert WaiterTable.plan(first, None, 1.0, fallback=10.0)[0] is Action.WAIT
        assert WaiterTable.plan(first, None, 2.01, fallback=10.0)[0] is Action.ATTEMPT
        WaiterTable.refused(first, False, 50, now=3.0)  # reserved for another for 50 ms
        assert WaiterTable.plan(first, 5.0, 3.0, fallback=10.0) == (
            Action.WAIT,
            pytest.approx(0.052),
        )

    def test_deadline_gives_up(self) -> None:
        _, first, _ = self.table()
        assert WaiterTable.plan(first, 1.0, 1.0, fallback=10.0) == (Action.GIVE_UP, None)

    def test_disconnect_wakes_everyone_and_unconfirms(self) -> None:
        table, first, second = self.table()
        table.confirmed = True
        assert table.on_disconnect() == [first, second]
        assert not table.confirmed and first.woken and second.woken

    def test_idle_after_linger(self) -> None:
        table, first, second = self.table()
        table.remove(first, now=0.0)
        table.remove(second, now=1.0)
        assert not table.idle(1.5, linger=1.0)
        assert table.idle(2.0, linger=1.0)
