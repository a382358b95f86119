"""Argument checks (``_core/validate.py``): no Redis."""

from __future__ import annotations

import math
import threading
from typing import Any

import pytest

from redlease._core import validate


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


@pytest.mark.parametrize("huge", [1e10, 1e300, 2**64])
def test_a_timeout_too_long_for_threading_waits_forever(huge: float) -> None:
    """``threading`` raises OverflowError past TIMEOUT_MAX: such a timeout is "forever"."""
    assert validate.timeout(huge) is None
    assert validate.timeout(1e9) == 1e9  # under the limit: kept
    with pytest.raises(OverflowError):  # the twin: what a wait that long does in threading
        threading.Event().wait(huge)


def test_text_that_is_not_utf8_names_the_argument() -> None:
    with pytest.raises(ValueError, match="name must be valid UTF-8"):
        validate.name("lock\udcff")
    with pytest.raises(ValueError, match="prefix must be valid UTF-8"):
        validate.prefix("app\udcff")


def test_lease_options_checks_each_and_names_it() -> None:
    options = validate.lease_options(2.5, -1, True, None, 0.2, coroutines=False)
    assert options == validate.LeaseOptions(2500, None, True, None, 200)
    with pytest.raises(TypeError, match="renew must be a bool"):
        validate.lease_options(1.0, None, 1, None, 0.2, coroutines=False)
    with pytest.raises(ValueError, match="ttl"):
        validate.lease_options(0, None, True, None, 0.2, coroutines=False)
    with pytest.raises(ValueError, match="timeout"):
        validate.lease_options(1.0, -2, True, None, 0.2, coroutines=False)
    with pytest.raises(ValueError, match="handoff"):
        validate.lease_options(1.0, None, True, None, 0, coroutines=False)


def test_wait_limit_blocking_or_not() -> None:
    assert validate.wait_limit(True, None, 5.0, given=False) == 5.0
    assert validate.wait_limit(True, 2, 5.0, given=True) == 2.0
    assert validate.wait_limit(True, -1, 5.0, given=True) is None
    assert validate.wait_limit(False, None, 5.0, given=False) == 0.0
    assert validate.wait_limit(False, -1, 5.0, given=True) == 0.0
    with pytest.raises(ValueError, match="timeout must not be given when blocking is False"):
        validate.wait_limit(False, 1, 5.0, given=True)
