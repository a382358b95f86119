"""redlease.arq.enqueue_once with real ``arq`` workers: the same call enqueued twice runs once
(plain ``enqueue_job``: twice), and a worker killed mid-job frees the call within the running
lease. Every wait is bounded."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest

pytest.importorskip("arq")

import redis
from arq.connections import ArqRedis

from redlease.arq import AlreadyQueued, enqueue_once, once_key
from tests.arq.conftest import spawn, stop, wait_for

pytestmark = pytest.mark.timeout(90)
_T = TypeVar("_T")


def on_pool(url: str, use: Callable[[ArqRedis], Awaitable[_T]]) -> _T:
    async def run() -> _T:
        pool = ArqRedis.from_url(url)
        try:
            return await use(pool)
        finally:
            await pool.aclose()

    return asyncio.run(run())


def calls(conn: redis.Redis, tag: str) -> list[str]:
    found = [r.decode().split() for r in conn.lrange("calls", 0, -1)]
    return [fence for t, fence in found if t == tag]


def test_the_same_call_enqueued_twice_runs_once(conn: redis.Redis, arq_url: str) -> None:
    async def twice(pool: ArqRedis) -> tuple[str, str]:
        first = await enqueue_once(pool, "record", "twice", _defer_by=0.5)
        with pytest.raises(AlreadyQueued):
            await enqueue_once(pool, "record", "twice")
        existing = await enqueue_once(pool, "record", "twice", _return_existing=True)
        return first.job_id, existing.job_id

    first, existing = on_pool(arq_url, twice)
    assert existing == first
    wait_for(lambda: calls(conn, "twice") and not conn.keys("*twice*arq-job*"))
    assert calls(conn, "twice") != ["None"]  # one run, which held the lock: it saw its fence
    again = on_pool(arq_url, lambda pool: enqueue_once(pool, "record", "twice"))
    assert again.job_id != first  # it ended: enqueued again
    wait_for(lambda: len(calls(conn, "twice")) == 2)


def test_twin_plain_enqueue_runs_the_same_call_twice(conn: redis.Redis, arq_url: str) -> None:
    async def twice(pool: ArqRedis) -> None:
        await pool.enqueue_job("record", "plain")
        await pool.enqueue_job("record", "plain")

    on_pool(arq_url, twice)
    wait_for(lambda: len(calls(conn, "plain")) == 2)
    assert calls(conn, "plain") == ["None", "None"]


def test_a_killed_worker_frees_the_call_within_the_lease(conn: redis.Redis, arq_url: str) -> None:
    def enqueue(pool: ArqRedis) -> Awaitable[Any]:
        return enqueue_once(pool, "record", "killed", 60.0, _ttl=1.0, _queue_name="kill")

    on_pool(arq_url, enqueue)
    proc = spawn(arq_url, "KillSettings")
    try:
        wait_for(lambda: calls(conn, "killed"))
        with pytest.raises(AlreadyQueued):
            on_pool(arq_url, enqueue)  # running: renewed
        proc.kill()
        proc.wait(timeout=30)
        killed = time.monotonic()
        while time.monotonic() - killed < 10:  # bounded
            try:
                on_pool(arq_url, enqueue)  # the same call
                break
            except AlreadyQueued:
                time.sleep(0.05)
        assert time.monotonic() - killed < 1.0 + 2.0  # within the lease, with slack
    finally:
        stop(proc)


def test_the_key_names_missing_once_keys() -> None:
    assert once_key("f", ("a",), {"b": 1}) == "arq:f:'a',b=1"
    assert once_key("f", ("a",), {"b": 1, "c": 2}, ["b"]) == once_key("f", (), {"b": 1}, ["b"])
    with pytest.raises(ValueError, match="_once_keys"):
        once_key("f", (), {"b": 1}, ["c"])
