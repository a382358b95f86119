"""The watchdog's schedule and batches (``_core/renewals.py``): no Redis."""

from __future__ import annotations

import gc

import pytest

from redlease._core.lease import Holding
from redlease._core.lock import RENEW
from redlease._core.renewals import RenewSchedule, batch_call, batches, by_end, decode
from redlease._core.scripts import Script


def holding(ttl_ms: int = 3000, key: bytes = b"k") -> Holding:
    return Holding(key=key, token=b"t", fence=1, owner=1, ttl_ms=ttl_ms, expires_at=100.0)


def test_renewals_come_every_third_of_the_lease_and_batch() -> None:
    schedule = RenewSchedule(batch=2, coalesce=0.25)
    a, b, c = holding(3000, b"a"), holding(3000, b"b"), holding(30_000, b"c")
    for h in (a, b, c):
        schedule.add(h, now=0.0)
    assert schedule.next_due() == 1.0
    assert schedule.take_due(0.5) == []
    assert schedule.take_due(1.0) == [a, b]  # due together, one batch
    schedule.discard(a)
    schedule.discard(b)
    assert schedule.next_due() == 10.0


def test_a_retry_waits_its_delay_coalescing_does_not_pull_it_forward() -> None:
    """Issue 9: a failed renewal retried after 0.5 s was taken again at once (0.5 s is within
    the coalescing horizon of a 10 s lease), so a dead server was retried in a busy loop."""
    schedule = RenewSchedule(coalesce=0.5)
    retried, regular = holding(10_000, b"r"), holding(10_000, b"g")
    schedule.add(retried, now=0.0, delay=0.5)  # the renewal sent at 0.0 failed
    assert schedule.take_due(0.01) == []
    assert schedule.next_due() == 0.5
    assert schedule.take_due(0.5) == [retried]
    # A regular renewal still coalesces (due at 3.33, taken from 2.0); a retry beside it waits.
    schedule.add(retried, now=2.0, delay=0.5)
    schedule.add(regular, now=0.0)
    assert schedule.take_due(2.0) == [regular]
    schedule.add(regular, now=2.0)  # renewed: next due at 5.33
    assert schedule.take_due(2.49) == []
    assert schedule.take_due(2.5) == [retried]


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


def test_batches_group_by_target_and_script_in_order() -> None:
    other = Script("other_renew", "return {}", "0" * 40)
    a, b, c, d = (holding(key=k) for k in (b"a", b"b", b"c", b"d"))
    a.renew_target, b.renew_target, c.renew_target, d.renew_target = "s1", "s2", "s1", "s1"
    a.renew_script = b.renew_script = c.renew_script = RENEW
    d.renew_script = other
    assert batches([a, b, c, d]) == [("s1", RENEW, [a, c]), ("s2", RENEW, [b]), ("s1", other, [d])]
    orphan = holding()
    orphan.renew_script = None
    with pytest.raises(ValueError, match="no renewal script"):
        batches([orphan])


def test_one_contract_for_every_renewal_script() -> None:
    a, b = holding(1000, b"a"), holding(2000, b"b")
    a.token, b.token = b"ta", b"tb"
    assert batch_call([a, b]) == ([b"a", b"b"], [b"ta", 1000, b"tb", 2000])
    assert decode([1, b"0"], 2) == [True, False]
    for nonsense in (None, [1], "1"):
        with pytest.raises(ValueError, match="renewal script"):
            decode(nonsense, 2)


def test_a_holding_about_to_run_out_is_renewed_apart_from_the_others() -> None:
    """Its batch would wait for a reply no longer than its lease end (almost nothing): the
    others, with seconds left, go in a call of their own, after its short one."""
    keeper, other, late = holding(key=b"keeper"), holding(key=b"other"), holding(key=b"late")
    keeper.expires_at, other.expires_at, late.expires_at = 103.0, 101.0, 100.01
    assert by_end([late, keeper, other], 100.0) == [[late], [keeper, other]]
    assert by_end([keeper], 100.0) == [[keeper]]
    assert by_end([late], 100.0) == [[late]]
