"""Who waits, and when each waiter tries again (``_core/waiters.py``): no Redis."""

from __future__ import annotations

from typing import Any

import pytest

from redlease._core.waiters import Action, WaiterTable, next_step, waiters_channel


def test_each_process_has_its_own_channel() -> None:
    assert waiters_channel(b"abc") == b"redlease:waiters:abc"


def test_n_servers_attempt_on_any_give_up_on_all_else_wait_for_the_first() -> None:
    attempt, give_up = (Action.ATTEMPT, None), (Action.GIVE_UP, None)
    assert next_step([(Action.WAIT, 1.0), attempt]) == attempt
    assert next_step([give_up, give_up]) == give_up
    assert next_step([give_up, (Action.WAIT, 2.0), (Action.WAIT, 0.5)]) == (Action.WAIT, 0.5)
    assert next_step([(Action.WAIT, None), give_up]) == (Action.WAIT, None)


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
