"""Scheduled fires run once across schedulers: the pure part of :mod:`redlease.apscheduler`.

A fire is a job id and a scheduled instant. The fires of one job are run under one lock,
``apscheduler:<job id>`` (leased and renewed while the job runs), and the last fire started is
recorded beside it, in a ``FencedStore`` of the same name written with the lock's fence (a
holder paused past its lease cannot overwrite its successor's record)::

    instant    the fire's scheduled instant, ms since the epoch (UTC)
    state      running | done
    host, pid  who ran it

So between fires a job keeps three keys (the lock's fence counter, the record and its meta),
whatever the number of its fires: no key per fire, none to expire.
Holding the lock, a scheduler reads the record and :func:`decide`\\ s: an instant that started
after the record's runs; the record's own instant runs again only if it is still ``running``
(its holder died: the lock is free only once its lease ran out); an earlier one never does.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = [
    "BUSY",
    "DONE",
    "LATER",
    "LOST",
    "MAX_WAIT",
    "MISSED",
    "REASONS",
    "RETRY",
    "RUN",
    "UNAVAILABLE",
    "Fire",
    "Skipped",
    "decide",
    "done",
    "instant_ms",
    "label",
    "lock_name",
    "started",
    "wait_left",
]

RUN, RETRY, DONE, LATER = "run", "retry", "done", "later"
""":func:`decide`'s answers: run it; run it again (its holder died mid-run); skip it, it ran;
skip it, a later instant of the job started already."""
MISSED, BUSY, UNAVAILABLE, LOST = "missed", "busy", "unavailable", "lost"
"""Why else a fire is skipped: too late (its misfire grace time ran out before it could start);
another scheduler ran the job for the whole grace time; Redis failed; the lock was lost."""
REASONS = {
    MISSED: "its misfire grace time ran out before it could start",
    BUSY: "another scheduler ran the job for all of its misfire grace time",
    DONE: "another scheduler ran it",
    LATER: "a later fire of the job started already",
    UNAVAILABLE: "Redis failed, so it is not run here (never run twice)",
    LOST: "the job's lock was lost (this process paused past its lease)",
}
"""Each reason to skip, as logs say it."""
MAX_WAIT = 86400.0
"""The longest a scheduler waits for another's run of a fire (a job without misfire limit)."""


@dataclass(frozen=True)
class Fire:
    """The fire a job runs for: ``job_id``, ``scheduled`` (its scheduled instant, an aware
    datetime) and ``fence``, the fencing token of the job's lock for this run (larger than
    every earlier run's: pass it to your storage to refuse a paused holder's late writes)."""

    job_id: str
    scheduled: datetime.datetime
    fence: int


@dataclass(frozen=True)
class Skipped:
    """A fire this scheduler did not run: ``reason`` (a key of ``REASONS``) and its
    ``instant`` (ms since the epoch)."""

    reason: str
    instant: int


def instant_ms(run_time: datetime.datetime) -> int:
    """A scheduled instant in whole ms since the epoch; ``ValueError`` if it is naive."""
    if not isinstance(run_time, datetime.datetime):
        raise TypeError(f"run_time must be a datetime, got {type(run_time).__name__}")
    if run_time.tzinfo is None or run_time.utcoffset() is None:
        raise ValueError(f"run_time must be timezone-aware, got {run_time!r}")
    return math.floor(run_time.timestamp() * 1000 + 0.5)


def label(instant: int) -> str:
    """An instant (ms) as ISO 8601 UTC text, as logs show it."""
    moment = datetime.datetime.fromtimestamp(instant / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def lock_name(job_id: str) -> str:
    """The name of the lock (and record) of the job ``job_id``."""
    if not isinstance(job_id, str) or not job_id:
        raise ValueError(f"job.id must be a non-empty str, got {job_id!r}")
    return f"apscheduler:{job_id}"


def started(instant: int, host: str, pid: int) -> dict[str | bytes, str | int]:
    """The record of a fire that starts now."""
    return {"instant": instant, "state": "running", "host": host, "pid": pid}


def done(instant: int, host: str, pid: int) -> dict[str | bytes, str | int]:
    """The record of a fire that ended (returned or raised: either way it ran)."""
    return {"instant": instant, "state": "done", "host": host, "pid": pid}


def decide(fields: Mapping[bytes, bytes], instant: int) -> str:
    """What to do with the fire ``instant``, given the job's record (read under its lock)."""
    recorded = fields.get(b"instant")
    if recorded is None:
        return RUN
    last = int(recorded)
    if instant > last:
        return RUN
    if instant < last:
        return LATER
    return RETRY if fields.get(b"state") == b"running" else DONE


def wait_left(run_time: datetime.datetime, grace: float | None, now: datetime.datetime) -> float:
    """Seconds left to start the fire ``run_time`` within its misfire grace time (APScheduler's
    own test, on the local clock): negative when missed; :data:`MAX_WAIT` without a limit."""
    if grace is None:
        return MAX_WAIT
    return min(grace - (now - run_time).total_seconds(), MAX_WAIT)
