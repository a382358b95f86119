"""Redlock's waiting decisions (``_core/waiters.py``): hold an attempt back until enough
servers reserved the lock for the waiter, and never longer than the patience given."""

from __future__ import annotations

from redlease._core.waiters import Waiter, WaiterTable, hold_back


def waiters(n: int) -> list[Waiter]:
    return [Waiter(b"p.t", None) for _ in range(n)]


def hear(table: WaiterTable, waiter: Waiter, kind: bytes, now: float) -> None:
    table._waiters[waiter.token] = waiter
    table.on_message(kind + waiter.token + b" 50", now)


def test_an_attempt_waits_for_every_tellers_reservation() -> None:
    """Woken by one server's H: hold back; once 3 (the tellers of 5) told: go at once."""
    ws = waiters(5)
    tables = [WaiterTable() for _ in ws]
    hear(tables[0], ws[0], b"H", 10.0)
    assert hold_back(ws, 3, 0.0125, 10.001) is not None
    hear(tables[1], ws[1], b"H", 10.002)
    wait = hold_back(ws, 3, 0.0125, 10.002)
    assert wait is not None and 0 < wait <= 0.0125
    hear(tables[2], ws[2], b"H", 10.003)
    assert hold_back(ws, 3, 0.0125, 10.003) is None


def test_a_missing_reservation_message_delays_the_attempt_never_loses_it() -> None:
    """The safety half: with only one H ever coming (two tellers down, or their messages
    lost), the attempt goes once the patience has passed since the first H."""
    ws = waiters(5)
    hear(WaiterTable(), ws[0], b"H", 10.0)
    assert hold_back(ws, 3, 0.0125, 10.0124) is not None
    assert hold_back(ws, 3, 0.0125, 10.0125) is None
    assert hold_back(ws, 3, 0.0125, 99.0) is None


def test_twin_without_the_patience_the_attempt_would_wait_for_ever() -> None:
    """The twin: the check above catches a hold-back with no bound (patience infinite):
    then the lone H keeps the waiter asleep however long it has been."""
    ws = waiters(5)
    hear(WaiterTable(), ws[0], b"H", 10.0)
    assert hold_back(ws, 3, float("inf"), 99.0) is not None


def test_other_wake_ups_go_at_once() -> None:
    """A turn that lapsed (N's window), a broken subscription: no holding back, whatever the
    H heard elsewhere; and nothing woken: nothing to hold back (the timers decide)."""
    ws = waiters(5)
    tables = [WaiterTable() for _ in ws]
    assert hold_back(ws, 3, 1.0, 10.0) is None
    hear(tables[0], ws[0], b"H", 10.0)
    tables[1]._waiters[ws[1].token] = ws[1]
    tables[1].on_disconnect()
    assert hold_back(ws, 3, 1.0, 10.0) is None
    ws2 = waiters(5)
    hear(WaiterTable(), ws2[0], b"H", 10.0)
    ws2[1].woken = True  # e.g. due(): the turn ahead lapsed
    assert hold_back(ws2, 3, 1.0, 10.0) is None


def test_n_and_t_messages_do_not_count_as_reservations() -> None:
    """Only H says the lock is reserved for this waiter: N and T do not wake it or count."""
    ws = waiters(5)
    tables = [WaiterTable() for _ in ws]
    hear(tables[0], ws[0], b"H", 10.0)
    hear(tables[1], ws[1], b"N", 10.0)
    hear(tables[2], ws[2], b"T", 10.0)
    assert [w.heard for w in ws] == [10.0, None, None, None, None]
    assert hold_back(ws, 3, 1.0, 10.0) is not None
