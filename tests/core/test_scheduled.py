"""The pure part of redlease.apscheduler: instants, the record and what a scheduler decides."""

from __future__ import annotations

import datetime

import pytest

from redlease._core.scheduled import (
    DONE,
    LATER,
    MAX_WAIT,
    RETRY,
    RUN,
    decide,
    done,
    instant_ms,
    label,
    lock_name,
    started,
    wait_left,
)

UTC = datetime.timezone.utc
NOON = datetime.datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def fields(record: dict[str | bytes, str | int]) -> dict[bytes, bytes]:
    """A record as FencedStore.read() returns it."""
    return {str(k).encode(): str(v).encode() for k, v in record.items()}


def test_an_instant_is_the_same_in_every_time_zone() -> None:
    paris = NOON.astimezone(datetime.timezone(datetime.timedelta(hours=1)))
    assert instant_ms(paris) == instant_ms(NOON) == 1795867200000
    assert label(instant_ms(NOON)) == "2026-11-28T12:00:00.000Z"


def test_a_naive_instant_or_a_bad_job_id_is_refused() -> None:
    with pytest.raises(ValueError, match="run_time"):
        instant_ms(datetime.datetime(2026, 11, 28, 12, 0))
    with pytest.raises(TypeError, match="run_time"):
        instant_ms(12.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"job\.id"):
        lock_name("")


def test_each_instant_runs_once_and_a_dead_holders_again() -> None:
    now = instant_ms(NOON)
    assert decide({}, now) == RUN
    assert decide(fields(done(now, "h", 1)), now) == DONE
    assert decide(fields(done(now, "h", 1)), now + 1000) == RUN
    assert decide(fields(done(now, "h", 1)), now - 1000) == LATER
    assert decide(fields(started(now, "h", 1)), now) == RETRY  # read under the lock: it died
    assert decide(fields(started(now, "h", 1)), now - 1000) == LATER


def test_the_wait_ends_with_the_misfire_grace_time() -> None:
    later = NOON + datetime.timedelta(seconds=3)
    assert wait_left(NOON, 5, later) == 2.0
    assert wait_left(NOON, 1, later) < 0
    assert wait_left(NOON, None, later) == MAX_WAIT
