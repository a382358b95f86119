"""RQ: ``enqueue_once`` beside ``queue.enqueue``, and the worker's side of it, ``run_once``,
beside a bare job run.

The enqueue rows enqueue a no-op function with an argument new at each call (so that each
call enqueues), on one queue nobody works. The worker's rows time ``job.perform()``, what a
worker calls to run a job it took: the function called in the job's context, no worker loop
around it (its dequeueing, forking and result keeping are the same with or without the glue).
Their jobs are enqueued before each round, untimed.

Rows: ``queue.enqueue`` (bare), ``enqueue_once`` (the call's lock taken and handed over, the
job's id kept beside it, then ``queue.enqueue``), ``enqueue_once duplicate`` (the same call
again: ``AlreadyQueued``, the lock's remaining time read for its message); ``job.perform``
(bare: the function run), ``job.perform of run_once`` (the lock adopted on a renewed lease,
the function run, the id deleted and the lock released).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import redis
import rq

from redlease.rq import AlreadyQueued, enqueue_once
from suites.jobs.measure import Row

SECTION = "RQ"
ENQUEUE = "queue.enqueue"
PERFORM = "job.perform: the function"


def noop(n: int) -> int:
    """The job: nothing, so that what is measured is what runs it."""
    return n


def rows(client: redis.Redis, closers: list[Any]) -> list[Row]:
    queue = rq.Queue("bench", connection=client)
    closers.append(queue.empty)
    numbers = itertools.count()
    enqueue_once(queue, noop, -1, prefix="bench")  # queued: the same call again is a duplicate

    def bare() -> None:
        queue.enqueue(noop, next(numbers))

    def once() -> None:
        enqueue_once(queue, noop, next(numbers), prefix="bench")

    def duplicate() -> None:
        try:
            enqueue_once(queue, noop, -1, prefix="bench")
        except AlreadyQueued:
            return
        raise AssertionError("a duplicate was enqueued")

    return [
        Row(SECTION, ENQUEUE, bare),
        Row(SECTION, "enqueue_once", once, bare=ENQUEUE),
        Row(SECTION, "enqueue_once: duplicate", duplicate, bare=ENQUEUE),
        *_perform_rows(queue, numbers),
    ]


def _perform_rows(queue: rq.Queue, numbers: Any) -> list[Row]:
    jobs: dict[str, list[Any]] = {"bare": [], "once": []}

    def preparer(kind: str, enqueue: Callable[[int], Any]) -> Callable[[int], None]:
        def prepare(n: int) -> None:
            jobs[kind] = [enqueue(next(numbers)) for _ in range(n)]

        return prepare

    def performer(kind: str) -> Callable[[], None]:
        def perform() -> None:
            job = jobs[kind].pop()
            if job.perform() is None:  # the copy of a job running already: skipped
                raise AssertionError(f"job {job.id} did not run")

        return perform

    return [
        Row(
            SECTION,
            PERFORM,
            performer("bare"),
            prepare=preparer("bare", lambda n: queue.enqueue(noop, n)),
        ),
        Row(
            SECTION,
            "job.perform: run_once",
            performer("once"),
            bare=PERFORM,
            prepare=preparer("once", lambda n: enqueue_once(queue, noop, n, prefix="bench")),
        ),
    ]
