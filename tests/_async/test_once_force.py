"""Once.force_release against a real server: an operator frees a run that hangs, or clears a
success so the job runs again (asyncio; tests/_sync/test_once_force.py is generated)."""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests._async.helpers import wait_until
from tests.support import AsyncTasks
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

KEY = b"redlease:{job}:once:run"
TTL = 0.6  # the holder renews every TTL / 3


@pytest.fixture
async def operator(server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """An operator's own client (another process, as `redlease release` is)."""
    conn = redis.asyncio.Redis(host=server.host, port=server.port)
    yield conn
    await redlease.close(conn)
    await conn.aclose()


async def hung_run(client: redis.asyncio.Redis, lost: list[int]) -> Any:
    """A run whose watchdog keeps renewing while its job hangs; ``lost`` hears on_lost."""
    once = redlease.Once(client, "job", every="1h", ttl=TTL, on_lost=lambda: lost.append(1))
    run = await once.try_start()
    assert run is not None
    return run


async def _true(value: bool) -> bool:
    return value


async def test_a_running_run_is_evicted_and_told_through_its_renewal(
    async_client: redis.asyncio.Redis,
    operator: redis.asyncio.Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="redlease")
    lost: list[int] = []
    run = await hung_run(async_client, lost)
    result = await redlease.Once.force_release(operator, "job")
    assert isinstance(result, redlease.ForceReleased) and result.state == "running"
    (removed,) = result.removed
    assert (removed.pid, removed.since) == (os.getpid(), run.fence / 1e6)
    assert result.fence > run.fence  # the fence moved on
    last = await redlease.Once(operator, "job", every="1h").last()
    assert last is not None and (last.state, last.free_in, last.token) == (
        "released",
        0.0,
        removed.token,
    )
    assert await wait_until(lambda: _true(lost == [1]), 5 * TTL)  # its watchdog found out
    assert not run.active
    with pytest.raises(redlease.RunLost):
        await run.finish()
    again = await redlease.Once(operator, "job", every="1h").try_start()  # free at once
    assert again is not None and again.fence > result.fence
    await again.finish()
    records = [r for r in caplog.records if getattr(r, "redlease_event", "") == "force_released"]
    assert len(records) == 1 and records[0].redlease_fence == result.fence  # type: ignore[attr-defined]


async def test_twin_without_it_the_hung_run_keeps_the_name(
    async_client: redis.asyncio.Redis, operator: redis.asyncio.Redis
) -> None:
    # The checks above fail on a live run left alone: renewed, never told, the name taken.
    lost: list[int] = []
    run = await hung_run(async_client, lost)
    await AsyncTasks.sleep(2 * TTL)
    assert lost == [] and run.active
    assert await redlease.Once(operator, "job", every="1h").try_start() is None
    await run.finish()


async def test_a_success_is_cleared_so_the_job_runs_again_now(
    async_client: redis.asyncio.Redis, operator: redis.asyncio.Redis
) -> None:
    once = redlease.Once(async_client, "job", every="24h")
    run = await once.try_start()
    assert run is not None
    await run.finish()
    done = await once.last()
    assert done is not None and done.state == "done" and await once.try_start() is None
    result = await redlease.Once.force_release(operator, "job")
    assert result.state == "done" and [h.token for h in result.removed] == [done.token]
    cleared = await once.last()
    assert cleared is not None and (cleared.state, cleared.free_in) == ("released", 0.0)
    assert cleared.ended == done.ended  # when it really ended
    rerun = await once.try_start()
    assert rerun is not None and rerun.fence > result.fence
    await rerun.finish()


async def test_a_free_name_or_another_token_changes_nothing(
    async_client: redis.asyncio.Redis, operator: redis.asyncio.Redis
) -> None:
    never = await redlease.Once.force_release(operator, "job")
    assert (never.removed, never.fence, never.state) == ((), 0, None)
    once = redlease.Once(async_client, "job", every="1h")
    failed = await once.try_start()
    assert failed is not None
    await failed.fail()  # free at once: nothing keeps the name
    before = await async_client.hgetall(KEY)
    free = await redlease.Once.force_release(operator, "job")
    assert (free.removed, free.fence, free.state) == ((), failed.fence, None)
    assert await async_client.hgetall(KEY) == before
    run = await once.try_start()
    last = await once.last()
    assert run is not None and last is not None
    # The token of the run that failed: the run in progress now is another one.
    stale = await redlease.Once.force_release(operator, "job", token=before[b"token"])
    assert stale.removed == () and run.active
    mine = await redlease.Once.force_release(operator, "job", token=last.token)
    assert [h.token for h in mine.removed] == [last.token]
    with pytest.raises(redlease.RunLost):
        await run.finish()


async def test_bad_arguments_and_foreign_data(
    async_client: redis.asyncio.Redis,
) -> None:
    force = redlease.Once.force_release
    with pytest.raises(ValueError, match=r"^token "):
        await force(async_client, "job", token="has space")
    with pytest.raises(TypeError, match=r"^token "):
        await force(async_client, "job", token=5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^prefix "):
        await force(async_client, "job", prefix="a b")
    with pytest.raises(ValueError, match=r"^name "):
        await force(async_client, "")
    with pytest.raises(TypeError, match="client must be a redis"):
        await force(AsyncTasks.WRONG_CLIENT(), "job")  # type: ignore[arg-type]
    await async_client.set(KEY, b"not ours")
    with pytest.raises(redlease.ForeignData) as info:
        await force(async_client, "job")
    assert info.value.key == KEY


async def test_an_outage_raises_once_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    srv.stop()
    with pytest.raises(redlease.OnceUnavailable, match="could not force-release once 'down'"):
        await redlease.Once.force_release(client, "down")
    await redlease.close(client)
    await client.aclose()
