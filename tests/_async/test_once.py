"""Once against a real server (asyncio; tests/_sync/test_once.py is generated)."""

from __future__ import annotations

import datetime
import math
import os
import socket
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio
from redis.exceptions import ConnectionError, TimeoutError

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks, a_coroutine_function, a_plain_function
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

KEY, FENCE = b"redlease:{job}:once:run", b"redlease:{job}:once:fence"


@pytest.fixture
async def other_host(server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """A second client: another host's view of the same server."""
    conn = redis.asyncio.Redis(host=server.host, port=server.port)
    yield conn
    await redlease.close(conn)
    await conn.aclose()


async def test_a_run_in_progress_skips_the_others(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    once = redlease.Once(async_client, "job", every=60)
    assert await once.last() is None
    run = await once.try_start()
    assert run is not None and run.fence > 0 and run.active
    assert await redlease.Once(other_host, "job", every=60).try_start() is None
    last = await once.last()
    assert last is not None
    assert (last.state, last.fence, last.ended) == ("running", run.fence, None)
    assert (last.host, last.pid) == (socket.gethostname(), os.getpid())
    assert 0 < last.free_in <= once.ttl
    assert abs(last.started - run.started) < 0.001
    assert abs(last.started - time.time()) < 60  # server time, seconds since the epoch
    await run.finish()
    assert not run.active


async def test_its_key_is_its_own(async_client: redis.asyncio.Redis) -> None:
    run = await redlease.Once(async_client, "job", every=60).try_start()
    assert run is not None
    # The common layout, <prefix>:{<name>}:<kind>:...: what acl_rules() grants.
    assert sorted(await async_client.keys("*")) == [
        b"redlease:{job}:once:fence",
        b"redlease:{job}:once:run",
    ]
    # A Lock of the same name is another primitive: free.
    assert await redlease.Lock(async_client, "job").acquire(blocking=False)
    await run.fail()


async def test_a_success_keeps_the_name_until_start_plus_every(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    once = redlease.Once(async_client, "job", every=1.5)
    run = await once.try_start()
    assert run is not None
    await run.finish()
    last = await once.last()
    assert last is not None and last.state == "done" and last.ended is not None
    assert 0 < last.free_in <= 1.5
    assert await redlease.Once(other_host, "job", every=1.5).try_start() is None
    started = time.monotonic()
    other = redlease.Once(other_host, "job", every=1.5)
    runs: list[Any] = []

    async def started_again() -> bool:
        runs.append(await other.try_start())
        return runs[-1] is not None

    assert await wait_until(started_again, limit=10)
    assert time.monotonic() - started >= 1.0  # not before the period (slack: clocks and rounding)
    assert runs[-1].fence > run.fence
    await runs[-1].finish()


async def test_skewed_starts_run_once(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    # Host A's cron fires first and the job takes 0.3 s; host B's fires 2 s late.
    ran: list[str] = []
    for host, client in (("a", async_client), ("b", other_host)):
        run = await redlease.Once(client, "report", every=60).try_start()
        if run is not None:
            ran.append(host)
            await AsyncTasks.sleep(0.3)
            await run.finish()
        await AsyncTasks.sleep(2.0 if host == "a" else 0)
    assert ran == ["a"]


async def test_skewed_starts_run_twice_with_a_plain_lock(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    # The twin: the old recipe (a lock released when the job ends) runs it on both hosts.
    ran: list[str] = []
    for host, client in (("a", async_client), ("b", other_host)):
        lock = redlease.Lock(client, "report", ttl=10)
        if await lock.acquire(blocking=False):
            ran.append(host)
            await AsyncTasks.sleep(0.3)
            await lock.release()
        await AsyncTasks.sleep(2.0 if host == "a" else 0)
    assert ran == ["a", "b"]


async def test_a_failed_run_frees_the_name_at_once(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    run = await redlease.Once(async_client, "job", every=3600).try_start()
    assert run is not None
    await run.fail()
    retry = await redlease.Once(other_host, "job", every=3600).try_start()
    assert retry is not None and retry.fence > run.fence
    await retry.finish()
    last = await redlease.Once(async_client, "job", every=3600).last()
    assert last is not None and (last.state, last.fence) == ("done", retry.fence)


async def test_a_dead_holder_frees_the_name_within_its_ttl(
    server: RedisServer, other_host: redis.asyncio.Redis
) -> None:
    dying = redis.asyncio.Redis(host=server.host, port=server.port)
    await dying.flushall()
    run = await redlease.Once(dying, "job", every=3600, ttl=1.0).try_start()
    assert run is not None
    await redlease.close(dying)  # its watchdog stops: as if the process died
    await dying.aclose()
    other = redlease.Once(other_host, "job", every=3600, ttl=1.0)
    assert await other.try_start() is None
    started = time.monotonic()
    runs: list[Any] = []

    async def free() -> bool:
        runs.append(await other.try_start())
        return runs[-1] is not None

    assert await wait_until(free, limit=10)
    assert time.monotonic() - started < 1.0 + 3  # within the ttl (generous slack)
    await runs[-1].finish()
    last = await other.last()
    assert last is not None and last.fence == runs[-1].fence > run.fence


async def test_a_live_holder_keeps_the_name_past_its_ttl(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    # The twin: the watchdog renews the run, so the name stays taken well past one ttl.
    run = await redlease.Once(async_client, "job", every=3600, ttl=0.5).try_start()
    assert run is not None
    await AsyncTasks.sleep(1.2)  # past two ttls (renewed every ~0.17 s: slack for a busy CI)
    assert await redlease.Once(other_host, "job", every=3600).try_start() is None
    last = await redlease.Once(other_host, "job", every=3600).last()
    assert last is not None and last.state == "running"
    await run.finish()


async def test_a_lapsed_run_is_lost_and_its_outcome_not_recorded(
    async_client: redis.asyncio.Redis, other_host: redis.asyncio.Redis
) -> None:
    once = redlease.Once(other_host, "job", every=3600, ttl=0.2)
    run = await once.try_start()
    assert run is not None
    await redlease.close(other_host)  # renewals stop
    await AsyncTasks.sleep(0.5)
    last = await redlease.Once(async_client, "job", every=3600).last()
    assert last is not None and last.state == "lost" and last.free_in == 0.0
    with pytest.raises(redlease.RunLost, match="lease ran out"):
        await run.finish()
    with pytest.raises(RuntimeError, match="ended already"):
        await run.fail()
    # Another run started meanwhile: the old one's fail() cannot free it.
    again = await once.try_start()
    newer = await redlease.Once(async_client, "job", every=3600).try_start()
    assert again is not None and newer is None
    await again.finish()


async def test_a_renewal_finding_the_run_gone_tells_on_lost(
    async_client: redis.asyncio.Redis,
) -> None:
    lost: list[str] = []
    once = redlease.Once(async_client, "job", every=60, ttl=0.3, on_lost=lambda: lost.append("x"))
    run = await once.try_start()
    assert run is not None
    await async_client.hset(KEY, b"token", b"someone else")

    async def told() -> bool:
        return bool(lost)

    assert await wait_until(told, limit=5)
    assert not run.active
    with pytest.raises(redlease.RunLost):
        await run.finish()


async def test_with_records_success_failure_and_skips(async_client: redis.asyncio.Redis) -> None:
    once = redlease.Once(async_client, "job", every=3600)
    with pytest.raises(KeyError):
        async with once as run:
            assert run is not None and once.run is run
            raise KeyError("boom")
    last = await once.last()
    assert last is not None and last.state == "failed"
    failed = last.fence
    async with once as run:
        assert run is not None
        async with once as skipped:
            assert skipped is None and once.run is None
        assert once.run is run
    assert once.run is None
    last = await once.last()
    assert last is not None and last.state == "done" and last.fence > failed


async def test_the_decorator_runs_or_returns_none(async_client: redis.asyncio.Redis) -> None:
    once = redlease.Once(async_client, "job", every=3600)
    fences: list[int] = []

    @once
    async def job(x: int) -> int:
        assert once.run is not None
        fences.append(once.run.fence)
        return x * 2

    assert await job(21) == 42
    assert await job(21) is None  # skipped: done within the period
    assert len(fences) == 1 and fences[0] > 0

    @redlease.Once(async_client, "failing", every=3600)
    async def failing() -> None:
        raise ValueError("no")

    for _ in range(2):  # a failure frees the name: the next call runs again
        with pytest.raises(ValueError):
            await failing()


async def test_fences_increase_across_runs(async_client: redis.asyncio.Redis) -> None:
    once = redlease.Once(async_client, "job", every=0.05)
    fences = []
    for _ in range(5):
        run = await once.try_start()
        assert run is not None
        fences.append(run.fence)
        await run.fail()
    assert fences == sorted(set(fences))  # strictly increasing


async def test_every_and_ttl_take_a_timedelta_or_the_command_lines_durations(
    async_client: redis.asyncio.Redis,
) -> None:
    once = redlease.Once(async_client, "job", every=datetime.timedelta(hours=24))
    assert once.every == 86400.0
    # As `redlease run --every 24h --ttl ...` writes them: it was a TypeError.
    once = redlease.Once(async_client, "job", every="24h", ttl="30s")
    assert (once.every, once.ttl) == (86400.0, 30.0)
    once = redlease.Once(async_client, "job", every="1h30m", ttl=datetime.timedelta(minutes=1))
    assert (once.every, once.ttl) == (5400.0, 60.0)
    run = await redlease.Once(async_client, "job", every="1d", ttl="500ms").try_start()
    assert run is not None
    await run.finish()
    last = await once.last()
    assert last is not None and (last.state, last.every) == ("done", 86400.0)


async def test_foreign_data_is_refused(async_client: redis.asyncio.Redis) -> None:
    await async_client.set(KEY, b"not ours")
    once = redlease.Once(async_client, "job", every=60)
    for call in (once.try_start, once.last):
        with pytest.raises(redlease.ForeignData) as info:
            await call()
        assert info.value.key == KEY
    await async_client.delete(KEY)
    await async_client.hset(FENCE, b"not", b"ours")
    with pytest.raises(redlease.ForeignData) as info:
        await once.try_start()
    assert info.value.key == FENCE


@pytest.mark.parametrize(
    ("kwargs", "error", "arg"),
    [
        ({"every": 0}, ValueError, "every"),
        ({"every": -1}, ValueError, "every"),
        ({"every": math.nan}, ValueError, "every"),
        ({"every": math.inf}, ValueError, "every"),
        ({"every": 401 * 86400}, ValueError, "every"),
        ({"every": "24x"}, ValueError, "every"),
        ({"every": "0s"}, ValueError, "every"),
        ({"every": "500d"}, ValueError, "every"),
        ({"every": b"24h"}, TypeError, "every"),
        ({"every": True}, TypeError, "every"),
        ({"every": 60, "ttl": 0.01}, ValueError, "ttl"),
        ({"every": 60, "ttl": "10ms"}, ValueError, "ttl"),
        ({"every": 60, "ttl": "31d"}, ValueError, "ttl"),
        ({"every": 60, "ttl": "ten"}, ValueError, "ttl"),
        ({"every": 60, "ttl": [10]}, TypeError, "ttl"),
        ({"every": 60, "prefix": "a b"}, ValueError, "prefix"),
        ({"every": 60, "on_lost": 3}, TypeError, "on_lost"),
    ],
)
async def test_bad_arguments(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: type, arg: str
) -> None:
    with pytest.raises(error, match=f"^{arg} "):
        redlease.Once(async_client, "job", **kwargs)


async def test_bad_names_clients_and_functions(async_client: redis.asyncio.Redis) -> None:
    with pytest.raises(ValueError, match=r"^name "):
        redlease.Once(async_client, "", every=60)
    with pytest.raises(TypeError, match="client must be a redis"):
        redlease.Once(AsyncTasks.WRONG_CLIENT(), "job", every=60)  # type: ignore[arg-type]
    once = redlease.Once(async_client, "job", every=60)
    wrong = a_plain_function if AsyncTasks.ASYNC else a_coroutine_function
    with pytest.raises(TypeError, match="Once decorates"):
        once(wrong)  # type: ignore[arg-type]


async def test_an_outage_raises_once_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    once = redlease.Once(client, "down", every=60)
    run = await once.try_start()
    assert run is not None
    srv.stop()
    for action, call in (
        ("start a run of", once.try_start),
        ("inspect", once.last),
        ("finish a run of", run.finish),
    ):
        with pytest.raises(redlease.OnceUnavailable, match=f"could not {action} once 'down'") as e:
            await call()
        assert isinstance(e.value.__cause__, (ConnectionError, TimeoutError, OSError))
        assert isinstance(e.value, redlease.OnceError)
    await redlease.close(client)
    await client.aclose()
