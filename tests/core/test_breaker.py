"""The circuit breaker of the web helpers: pure transitions on a given clock."""

from __future__ import annotations

import pytest

from redlease._core.breaker import Breaker, backoff


def test_closed_until_a_failure_then_open_for_the_backoff() -> None:
    breaker = Breaker(2.0)
    assert breaker.allows(0.0) and breaker.allows(100.0)  # closed: every call
    breaker.failed(100.0)
    assert not breaker.allows(100.5) and not breaker.allows(101.9)
    assert breaker.remaining(101.0) == pytest.approx(1.0)


def test_one_trial_per_backoff_and_a_success_closes_it() -> None:
    breaker = Breaker(2.0)
    breaker.failed(0.0)
    assert breaker.allows(2.0)  # the trial
    assert not breaker.allows(2.1)  # the others wait while it runs (or if it never reports)
    assert breaker.allows(4.0)  # a trial that never reported: another one a back-off later
    breaker.failed(4.5)
    assert not breaker.allows(6.0) and breaker.allows(6.5)
    breaker.succeeded()
    assert breaker.allows(6.6) and breaker.allows(6.7) and breaker.remaining(6.7) == 0


def test_twin_a_zero_backoff_never_opens() -> None:
    breaker = Breaker(0)
    breaker.failed(1.0)
    assert breaker.allows(1.0) and breaker.allows(1.0)


@pytest.mark.parametrize(
    ("value", "error"), [("2", TypeError), (True, TypeError), (-1, ValueError),
                         (float("nan"), ValueError), (3601, ValueError)],
)  # fmt: skip
def test_bad_backoffs_name_the_argument(value: object, error: type[Exception]) -> None:
    with pytest.raises(error, match=r"^backoff must be"):
        backoff(value)
    with pytest.raises(error, match=r"^REDLEASE\[.backoff.\] must be"):
        backoff(value, 'REDLEASE["backoff"]')
