"""redlease.arq.cron with three real ``arq`` workers on a private server: each fire of a
cron job runs on one worker; a fire enqueued again after its run (arq#196: a late worker's
copy, shown here by removing arq's in-progress key) is skipped, where a plain arq cron runs it
twice. Every wait is bounded."""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import pytest

pytest.importorskip("arq")

import redis
from arq.connections import ArqRedis

from redlease.arq import cron
from tests.arq.conftest import wait_for

pytestmark = pytest.mark.timeout(90)


def runs(conn: redis.Redis, tag: str) -> collections.Counter[str]:
    found = [r.decode().split() for r in conn.lrange("runs", 0, -1)]
    return collections.Counter(ms for t, ms, _ in found if t == tag)


def test_each_fire_runs_once_and_a_late_copy_is_skipped(conn: redis.Redis, arq_url: str) -> None:
    wait_for(lambda: len(runs(conn, "guarded")) >= 3 and len(runs(conn, "plain")) >= 3)
    assert max(runs(conn, "guarded").values()) == 1
    # A late worker's copy of a fire that ran (arq#196): arq enqueues it again, and runs it
    # once arq's in-progress key is gone (kept 60 s; removed here to see it now).
    first = {name: sorted(runs(conn, name))[0] for name in ("plain", "guarded")}

    async def enqueue_again() -> None:
        pool = ArqRedis.from_url(arq_url)
        for name, ms in first.items():
            job_id = f"cron:{name}:{ms}"
            await pool.delete(f"arq:in-progress:{job_id}")
            assert await pool.enqueue_job(f"cron:{name}", _job_id=job_id) is not None
        await pool.aclose()

    asyncio.run(enqueue_again())
    wait_for(lambda: runs(conn, "plain")[first["plain"]] == 2)  # the twin: it ran twice
    time.sleep(1.0)  # the guarded copy had as long, and more
    assert runs(conn, "guarded")[first["guarded"]] == 1
    assert max(runs(conn, "guarded").values()) == 1


def test_options_arq_owns_are_refused() -> None:
    async def job(ctx: dict[str, Any]) -> None: ...

    with pytest.raises(ValueError, match="unique"):
        cron(job, unique=False)
    with pytest.raises(ValueError, match="ttl"):
        cron(job, ttl=0)
    assert cron(job, second=5).name == "cron:" + job.__qualname__
