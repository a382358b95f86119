"""``Health``: one server's down/slow state and its probe back-off, the clock passed in."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from redlease._core.health import PROBE, PROBE_MAX, Health


def test_a_new_server_is_answering_and_may_be_probed_at_once() -> None:
    health = Health()
    assert not health.hung() and not health.down and not health.slow
    assert health.probe(0.0)


def test_a_failure_begins_one_outage_and_an_answer_ends_it() -> None:
    health = Health()
    assert health.failed(10.0)  # logged: it stopped answering
    assert not health.failed(11.0)  # not again while down
    assert health.down and health.hung()
    assert health.answered()  # logged: it answers again
    assert not health.answered()  # nothing to log twice
    assert not health.down and not health.hung()


def test_an_answer_while_up_ends_nothing() -> None:
    """The twin of the outage's end: no ``server_available`` for a server never down."""
    health = Health()
    assert not health.answered()
    health.late(1.0)
    assert not health.answered() and health.slow  # slow is not down


def test_a_late_reply_makes_it_slow_until_one_on_time() -> None:
    health = Health()
    health.late(5.0)
    assert health.slow and health.hung() and not health.down
    health.on_time()
    assert not health.slow and not health.hung()


def test_a_failure_defers_the_probe_by_the_first_interval() -> None:
    health = Health()
    health.failed(100.0)
    assert not health.probe(100.0 + PROBE / 2)
    assert health.probe(100.0 + PROBE)


def test_the_probe_interval_doubles_up_to_its_cap() -> None:
    health = Health()
    now = 0.0
    health.failed(now)
    now += PROBE
    intervals = []
    for _ in range(12):
        assert health.probe(now)
        intervals.append(health.probe_at - now)
        assert not health.probe(health.probe_at - 0.001)
        now = health.probe_at
    assert intervals[:3] == [2 * PROBE, 4 * PROBE, 8 * PROBE]
    assert intervals[-1] == PROBE_MAX and max(intervals) == PROBE_MAX


def test_failing_again_while_down_keeps_the_grown_interval() -> None:
    health = Health()
    health.failed(0.0)
    assert health.probe(PROBE)  # next in 2 * PROBE
    assert health.probe(PROBE + 2 * PROBE)  # next in 4 * PROBE
    at = health.probe_at
    health.failed(at - 0.1)  # still failing: the later probe stays, and the interval
    assert health.probe_every == 4 * PROBE
    assert health.probe_at == max(at, at - 0.1 + 4 * PROBE)


def test_a_server_that_answered_starts_its_back_off_afresh() -> None:
    health = Health()
    health.failed(0.0)
    for now in (PROBE, 3 * PROBE, 7 * PROBE):
        assert health.probe(now)
    assert health.probe_every == 8 * PROBE
    health.answered()
    health.on_time()
    health.failed(1000.0)
    assert health.probe_every == PROBE and health.probe_at == 1000.0 + PROBE


def test_without_the_reset_the_back_off_would_carry_over() -> None:
    """The twin: a failure while still hung keeps the grown interval, so the reset above is
    what a recovery buys."""
    health = Health()
    health.failed(0.0)
    for now in (PROBE, 3 * PROBE, 7 * PROBE):
        health.probe(now)
    health.failed(1000.0)  # never answered in between
    assert health.probe_every == 8 * PROBE and health.probe_at == 1000.0 + 8 * PROBE


EVENTS = st.lists(
    st.tuples(
        st.sampled_from(["failed", "answered", "on_time", "late", "probe"]),
        st.floats(min_value=0.0, max_value=120.0, allow_nan=False),
    ),
    max_size=60,
)


@given(EVENTS)
def test_any_history_keeps_the_invariants(events: list[tuple[str, float]]) -> None:
    health = Health()
    now = 0.0
    down = False
    for name, step in events:
        now += step
        before = health.probe_at
        if name == "failed":
            assert health.failed(now) is (not down)
            down = True
            assert health.probe_at >= now + PROBE
        elif name == "answered":
            assert health.answered() is down
            down = False
        elif name == "on_time":
            health.on_time()
            assert not health.slow
        elif name == "late":
            health.late(now)
            assert health.slow and health.probe_at >= now + PROBE
        else:
            due = now >= before
            assert health.probe(now) is due
            if due:
                assert health.probe_at == now + health.probe_every
        assert health.down is down
        assert health.hung() is (health.down or health.slow)
        assert PROBE <= health.probe_every <= PROBE_MAX
        assert health.probe_at >= before  # a probe is never brought forward
