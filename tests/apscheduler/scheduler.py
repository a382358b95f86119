"""One scheduler process of tests/apscheduler: ``python -m tests.apscheduler.scheduler URL TAG
MODE [SECONDS]``.

MODE: ``once`` (BackgroundScheduler + OnceExecutor), ``plain`` (its ThreadPoolExecutor alone,
the broken twin) or ``asyncio`` (AsyncIOScheduler + AsyncIOOnceExecutor, a coroutine job).
Prints ``ready``, takes the first instant from the list ``<TAG>:go`` (the test pushes it once
every process is ready), runs the job ``tick`` every second for ``<TAG>:count`` instants and
exits a little after the last one. Each run pushes ``start|done <instant ms> <pid>`` to
``<TAG>:runs``; the job takes ``SECONDS`` (default 0.2).
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from datetime import datetime, timedelta, timezone

import redis
import redis.asyncio

from redlease.apscheduler import AsyncIOOnceExecutor, OnceExecutor, current_fire

TTL = 1.5  # short, so that a killed scheduler's job is free again soon
JOB = {"id": "tick", "misfire_grace_time": 5, "max_instances": 3}


def instant_of(first: float) -> int:
    """The instant this run is for: the fire's own, or (plain twin) the nearest second."""
    fire = current_fire()
    if fire is not None:
        return round(fire.scheduled.timestamp() * 1000)
    return round(first * 1000 + round(time.time() - first) * 1000)


def trigger(first: float, count: int) -> dict[str, object]:
    start = datetime.fromtimestamp(first, timezone.utc)
    end = start + timedelta(seconds=count - 1, milliseconds=100)
    return {"trigger": "interval", "seconds": 1, "start_date": start, "end_date": end}


def main(url: str, tag: str, mode: str, seconds: float) -> None:
    client = redis.Redis.from_url(url)
    print("ready", flush=True)
    first = float(client.blpop([f"{tag}:go"], timeout=60)[1])
    count = int(client.get(f"{tag}:count") or 0)
    stop_at = first + count + seconds + 1.0
    runs = f"{tag}:runs"

    def tick() -> None:
        instant = instant_of(first)
        client.rpush(runs, f"start {instant} {os.getpid()}")
        time.sleep(seconds)
        client.rpush(runs, f"done {instant} {os.getpid()}")

    if mode == "asyncio":
        asyncio.run(main_asyncio(url, tag, first, count, stop_at, seconds))
        return
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    executor = (
        ThreadPoolExecutor() if mode == "plain" else OnceExecutor(client, ttl=TTL, prefix=tag)
    )
    scheduler = BackgroundScheduler(executors={"default": executor}, timezone=timezone.utc)
    scheduler.add_job(tick, **trigger(first, count), **JOB)
    scheduler.start()
    time.sleep(max(stop_at - time.time(), 0))
    scheduler.shutdown(wait=True)


async def main_asyncio(
    url: str, tag: str, first: float, count: int, stop_at: float, seconds: float
) -> None:
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    client = redis.asyncio.Redis.from_url(url)
    runs = f"{tag}:runs"

    async def tick() -> None:
        instant = instant_of(first)
        await client.rpush(runs, f"start {instant} {os.getpid()}")
        await asyncio.sleep(seconds)
        await client.rpush(runs, f"done {instant} {os.getpid()}")

    executor = AsyncIOOnceExecutor(client, ttl=TTL, prefix=tag)
    scheduler = AsyncIOScheduler(executors={"default": executor}, timezone=timezone.utc)
    scheduler.add_job(tick, **trigger(first, count), **JOB)
    scheduler.start()
    await asyncio.sleep(max(stop_at - time.time(), 0))
    scheduler.shutdown(wait=False)
    await client.aclose()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 0.2)
