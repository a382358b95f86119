"""Lock arguments: bad input refused before anything is sent, bytes names
(asyncio; tests/_sync/test_lock_arguments.py is generated)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


# -- bad input ------------------------------------------------------------------------------
BAD_TTLS = [
    (0, ValueError, "ttl must be > 0"),
    (-1, ValueError, "ttl must be > 0"),
    (math.nan, ValueError, "ttl must be a number of seconds, got NaN"),
    (math.inf, ValueError, "ttl must be at most 30 days"),
    (31 * 24 * 3600, ValueError, "ttl must be at most 30 days"),
    ("10", TypeError, "ttl must be a number of seconds, got str"),
    (True, TypeError, "ttl must be a number of seconds, got bool"),
    (None, TypeError, "ttl must be a number of seconds, got NoneType"),
    (0.0001, ValueError, "ttl must be at least 0.05 seconds"),
    (0.049, ValueError, "ttl must be at least 0.05 seconds"),
]


@pytest.mark.parametrize(("ttl", "error", "message"), BAD_TTLS)
async def test_bad_ttl(
    async_client: redis.asyncio.Redis, ttl: Any, error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, "x", ttl=ttl)
    lock = redlease.Lock(async_client, "x")
    if ttl is not None:
        await lock.acquire()
        with pytest.raises(error, match=message):
            await lock.extend(ttl)
        await lock.release()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"timeout": -2}, ValueError, "timeout must be >= 0 seconds, or None / -1"),
        ({"timeout": math.nan}, ValueError, "timeout must be a number of seconds, got NaN"),
        ({"timeout": "1"}, TypeError, "timeout must be a number of seconds, got str"),
        ({"prefix": "my app"}, ValueError, "prefix must not contain white space or braces"),
        ({"prefix": "a{b}"}, ValueError, "prefix must not contain white space or braces"),
        ({"prefix": ""}, ValueError, "prefix must not be empty"),
        ({"prefix": b"x"}, TypeError, "prefix must be str, got bytes"),
        ({"renew": 1}, TypeError, "renew must be a bool"),
        ({"on_lost": 3}, TypeError, "on_lost must be callable"),
        ({"on_lost": lambda why: None}, TypeError, "on_lost must be callable with no arguments"),
        ({"ttl": 0.01}, ValueError, "ttl must be at least 0.05 seconds"),
        ({"handoff": 0}, ValueError, "handoff must be > 0"),
    ],
)
async def test_bad_options(
    async_client: redis.asyncio.Redis, kwargs: dict[str, Any], error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, "x", **kwargs)


@pytest.mark.parametrize(
    ("name", "error", "message"),
    [
        ("", ValueError, "name must not be empty"),
        (b"", ValueError, "name must not be empty"),
        (42, TypeError, "name must be str or bytes, got int"),
        (None, TypeError, "name must be str or bytes, got NoneType"),
    ],
)
async def test_bad_name(
    async_client: redis.asyncio.Redis, name: Any, error: Any, message: str
) -> None:
    with pytest.raises(error, match=message):
        redlease.Lock(async_client, name)


async def test_bad_acquire_arguments(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "args")
    with pytest.raises(ValueError, match="timeout must not be given when blocking is False"):
        await lock.acquire(blocking=False, timeout=1)
    with pytest.raises(ValueError, match="timeout must be >= 0"):
        await lock.acquire(timeout=-5)
    assert await lock.acquire(timeout=-1)  # -1 is "forever", as in threading
    await lock.release()


async def test_client_of_the_wrong_kind_is_refused() -> None:
    wrong = AsyncTasks.WRONG_CLIENT()
    with pytest.raises(
        TypeError,
        match=r"must be a redis.*sync clients go with redlease, asyncio clients with "
        r"redlease\.asyncio\)",
    ):
        redlease.Lock(wrong, "x")
    with pytest.raises(TypeError, match="client must be a redis"):
        redlease.Lock("redis://localhost", "x")  # type: ignore[arg-type]


async def test_bytes_names_work(async_client: redis.asyncio.Redis) -> None:
    async with redlease.Lock(async_client, b"\xffraw") as lock:
        assert lock.fence is not None and lock.fence > 0
        assert await async_client.exists(b"redlease:{\xffraw}:lock") == 1
