"""APScheduler 3.x: a fire through ``OnceExecutor`` beside the same fire through the executor
it wraps.

Both executors are APScheduler's own code down to the thread pool's hand-off, which is the same
with or without the glue and is left out: the wrapped executor is :class:`InlineExecutor`, a
``ThreadPoolExecutor`` whose ``_do_submit_job`` calls APScheduler's ``run_job`` in the caller's
thread (the pool calls it in one of its threads). Each call is ``executor.submit_job(job,
[run_time])`` for a real ``apscheduler.job.Job`` of a no-op function: the instance count, the
proxy, ``run_job`` (the misfire check, the call, the event) and the executed event dispatched.

Rows: ``plain executor`` (the bare path), ``OnceExecutor run`` (a new instant each call: the
job's lock, its record read, written at the start and the end, the lock released) and
``OnceExecutor skip`` (an instant another scheduler ran: the lock, the record read, released).
"""

from __future__ import annotations

import itertools
from datetime import datetime, timedelta, timezone
from typing import Any

import redis
from apscheduler.executors.base import BaseExecutor, run_job
from apscheduler.job import Job
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.interval import IntervalTrigger

from redlease.apscheduler import OnceExecutor
from suites.jobs.measure import Row

SECTION = "APScheduler"
START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def noop() -> None:
    """The job: nothing, so that what is measured is what runs it."""


class InlineExecutor(BaseExecutor):  # type: ignore[misc]
    """``ThreadPoolExecutor`` without the pool: ``run_job`` in the caller's thread."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        events = run_job(job, job._jobstore_alias, run_times, self._logger.name)
        self._run_job_success(job.id, events)


def _job(scheduler: Any, job_id: str) -> Any:
    job = Job(
        scheduler,
        id=job_id,
        func=noop,
        trigger=IntervalTrigger(seconds=1, start_date=START),
        executor="default",
        args=(),
        kwargs={},
        name=job_id,
        misfire_grace_time=None,
        coalesce=True,
        max_instances=1,
        next_run_time=None,
    )
    job._jobstore_alias = "default"
    return job


def rows(client: redis.Redis, closers: list[Any]) -> list[Row]:
    scheduler = BackgroundScheduler()  # never started: it only lends its lock and events
    plain = InlineExecutor()
    plain.start(scheduler, "plain")
    once = OnceExecutor(client, InlineExecutor(), ttl=30.0, prefix="bench")
    once.start(scheduler, "once")
    closers.append(lambda: once.shutdown())
    bare_job, run_job_, skip_job = (_job(scheduler, n) for n in ("bare", "run", "skip"))
    instants = (START + timedelta(seconds=n) for n in itertools.count())
    done = next(instants)
    once.submit_job(skip_job, [done])  # ran: every later fire of it skips

    def bare() -> None:
        plain.submit_job(bare_job, [START])

    def run() -> None:
        once.submit_job(run_job_, [next(instants)])

    def skip() -> None:
        once.submit_job(skip_job, [done])

    return [
        Row(SECTION, "plain executor: run_job", bare),
        Row(SECTION, "OnceExecutor: fire run", run, bare="plain executor: run_job"),
        Row(SECTION, "OnceExecutor: fire skip", skip, bare="plain executor: run_job"),
    ]
