"""The arq worker settings the tests run (a real ``arq`` worker process imports them)."""

from __future__ import annotations

import asyncio
import os
from typing import Any, ClassVar

from arq import cron as plain_cron
from arq.connections import RedisSettings

from redlease.arq import cron, current_fence, current_fire, func


async def guarded(ctx: dict[str, Any]) -> None:
    """Record this run of its fire (``guarded <ms> <fence>`` in the list ``runs``)."""
    fire = current_fire()
    assert fire is not None
    ms = int(fire.scheduled.timestamp() * 1000)
    await ctx["redis"].rpush("runs", f"guarded {ms} {fire.fence}")
    await asyncio.sleep(0.2)


async def plain(ctx: dict[str, Any]) -> None:
    """The twin: record this run of its fire, from arq's unique job id."""
    await ctx["redis"].rpush("runs", f"plain {ctx['job_id'].rpartition(':')[2]} -")
    await asyncio.sleep(0.2)


async def record(ctx: dict[str, Any], tag: str, seconds: float = 0.0) -> str:
    """Record the call (``<tag> <fence>`` in the list ``calls``), then take ``seconds``."""
    await ctx["redis"].rpush("calls", f"{tag} {current_fence()}")
    await asyncio.sleep(seconds)
    return tag


class WorkerSettings:
    redis_settings = RedisSettings.from_dsn(os.environ.get("REDLEASE_ARQ_URL", "redis://x"))
    cron_jobs: ClassVar[list[Any]] = [
        cron(guarded, second=set(range(60)), ttl=2.0),
        plain_cron(plain, second=set(range(60))),
    ]
    functions: ClassVar[list[Any]] = [func(record, name="record")]
    poll_delay = 0.1


class KillSettings:
    """A worker of its own queue, to be killed mid-job."""

    redis_settings = WorkerSettings.redis_settings
    functions = WorkerSettings.functions
    queue_name = "kill"
    poll_delay = 0.1
