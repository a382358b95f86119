"""OnceExecutor in one process: its arguments, its events, and a fire with Redis down.

A fire whose Redis is unreachable is skipped (a WARNING and ``EVENT_JOB_MISSED``), never run;
the twin, APScheduler's own thread pool, runs it. A fire another scheduler ran sends no event
here; an exception in the job is recorded as a run and reported as APScheduler reports it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

pytest.importorskip("apscheduler")

import redis
import redis.asyncio
from apscheduler.events import EVENT_ALL, EVENT_JOB_ERROR, EVENT_JOB_EXECUTED, EVENT_JOB_MISSED
from apscheduler.executors.pool import ProcessPoolExecutor, ThreadPoolExecutor
from apscheduler.schedulers.background import BackgroundScheduler
from redis.backoff import NoBackoff
from redis.retry import Retry

import redlease.metrics
from redlease import FencedStore
from redlease.apscheduler import AsyncIOOnceExecutor, OnceExecutor, current_fire

pytestmark = pytest.mark.timeout(60)
JOB_EVENTS = EVENT_JOB_EXECUTED | EVENT_JOB_ERROR | EVENT_JOB_MISSED


def run_one_fire(executor: Any, func: Callable[[], Any]) -> list[Any]:
    """Schedule ``func`` once, now; the job events of that fire (waits at most 20 s)."""
    events: list[Any] = []
    seen = threading.Event()

    def listen(event: Any) -> None:
        if event.code & JOB_EVENTS:
            events.append(event)
            seen.set()

    scheduler = BackgroundScheduler(executors={"default": executor}, timezone=timezone.utc)
    scheduler.add_listener(listen, EVENT_ALL)
    scheduler.add_job(func, "date", run_date=datetime.now(timezone.utc), id="job")
    scheduler.start()
    try:
        seen.wait(20)
        time.sleep(0.2)  # (a second event would be a bug: give it time to show)
    finally:
        scheduler.shutdown(wait=True)
    return events


@pytest.fixture
def dead_client(make_server: Any) -> Iterator[redis.Redis]:
    srv = make_server()
    client = redis.Redis(host=srv.host, port=srv.port, retry=Retry(NoBackoff(), 0))
    srv.stop()
    yield client
    client.close()


def test_arguments_are_checked(client: redis.Redis) -> None:
    with pytest.raises(TypeError, match="executor"):
        OnceExecutor(client, ProcessPoolExecutor(1))
    with pytest.raises(TypeError, match="executor"):
        OnceExecutor(client, OnceExecutor(client))
    with pytest.raises(ValueError, match="ttl"):
        OnceExecutor(client, ttl=0)
    with pytest.raises(ValueError, match="prefix"):
        OnceExecutor(client, prefix="a b")
    with pytest.raises(TypeError, match="client"):
        OnceExecutor(redis.asyncio.Redis())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="executor"):
        AsyncIOOnceExecutor(redis.asyncio.Redis(), ThreadPoolExecutor())


@pytest.mark.parametrize("once", [True, False], ids=["OnceExecutor", "twin-threadpool"])
def test_with_redis_down_a_fire_is_skipped_not_run(
    dead_client: redis.Redis, once: bool, caplog: pytest.LogCaptureFixture
) -> None:
    ran: list[int] = []
    executor = OnceExecutor(dead_client) if once else ThreadPoolExecutor()
    with caplog.at_level(logging.WARNING, logger="redlease"):
        events = run_one_fire(executor, lambda: ran.append(1))
    if not once:  # the twin: APScheduler alone runs it
        assert ran == [1] and [e.code for e in events] == [EVENT_JOB_EXECUTED]
        return
    assert ran == []
    assert [e.code for e in events] == [EVENT_JOB_MISSED]
    skipped = [r for r in caplog.records if getattr(r, "redlease_event", "") == "fire_skipped"]
    assert [r.levelno for r in skipped] == [logging.WARNING]
    assert skipped[0].redlease_reason == "unavailable"


class Counted(redlease.metrics.Observer):
    """Records the fires' outcomes as the metrics see them."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str]] = []

    def acquired(self, primitive: str, name: str, waited: float) -> None:
        if primitive == "apscheduler":
            self.seen.append(("acquired", name))

    def not_acquired(self, primitive: str, name: str, waited: float) -> None:
        if primitive == "apscheduler":
            self.seen.append(("not_acquired", name))


@pytest.fixture
def counted() -> Iterator[Counted]:
    observer = Counted()
    previous = redlease.metrics.use(observer)
    yield observer
    redlease.metrics.use(previous)


def test_a_fire_run_elsewhere_sends_no_event_here(client: redis.Redis, counted: Counted) -> None:
    """Recorded as done by "another scheduler" (its record written as it would be): skipped,
    with no event, and counted as not acquired."""
    ran: list[int] = []

    def job() -> None:
        ran.append(1)

    first = run_one_fire(OnceExecutor(client, prefix="t5"), job)
    assert ran == [1] and [e.code for e in first] == [EVENT_JOB_EXECUTED]
    instant = first[0].scheduled_run_time
    scheduler = BackgroundScheduler(
        executors={"default": OnceExecutor(client, prefix="t5")}, timezone=timezone.utc
    )
    events: list[Any] = []
    scheduler.add_listener(events.append, JOB_EVENTS)
    scheduler.add_job(job, "date", run_date=instant, id="job", misfire_grace_time=30)
    scheduler.start()
    time.sleep(1.0)  # the same instant: skipped at once (nothing to wait for)
    scheduler.shutdown(wait=True)
    assert ran == [1] and events == []
    assert counted.seen == [("acquired", "job"), ("not_acquired", "job")]
    record = FencedStore(client, "apscheduler:job", prefix="t5").read().fields
    assert record[b"state"] == b"done"


def test_a_job_that_raises_has_run_and_knows_its_fire(client: redis.Redis) -> None:
    seen: list[Any] = []

    def job() -> None:
        seen.append(current_fire())
        raise RuntimeError("boom")

    events = run_one_fire(OnceExecutor(client, prefix="t6"), job)
    assert [e.code for e in events] == [EVENT_JOB_ERROR]
    fire = seen[0]
    assert fire.job_id == "job" and fire.scheduled == events[0].scheduled_run_time
    assert fire.fence > 0 and current_fire() is None
    record = FencedStore(client, "apscheduler:job", prefix="t6").read().fields
    assert record[b"state"] == b"done"  # kept: APScheduler does not retry it, nor do others


async def test_asyncio_executor_runs_sync_and_coroutine_jobs(
    async_client: redis.asyncio.Redis,
) -> None:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    fires: list[Any] = []
    done = asyncio.Event()

    async def coroutine_job() -> None:
        fires.append(current_fire())

    def thread_job() -> None:
        fires.append(current_fire())

    def listen(event: Any) -> None:
        if len(fires) == 2:
            done.set()

    executor = AsyncIOOnceExecutor(async_client, prefix="t7")
    scheduler = AsyncIOScheduler(executors={"default": executor}, timezone=timezone.utc)
    scheduler.add_listener(listen, JOB_EVENTS)
    now = datetime.now(timezone.utc)
    scheduler.add_job(coroutine_job, "date", run_date=now, id="a")
    scheduler.add_job(thread_job, "date", run_date=now + timedelta(milliseconds=10), id="b")
    scheduler.start()
    try:
        await asyncio.wait_for(done.wait(), 20)
    finally:
        scheduler.shutdown(wait=False)
    assert sorted(f.job_id for f in fires) == ["a", "b"]
