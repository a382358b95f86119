"""Every key redlease.cached writes expires, whatever happens (asyncio; tests/_sync is generated).

A crowd on a cold key, a computation that raises, a rebuild caught in flight (what a process
that died there leaves): after each, no key of the cache is without an expiry. The broken
twin runs the same check with the lock scripts as they were, whose acquisitions dropped the
fencing counter's expiry (``SET`` without ``KEEPTTL``), and finds the counters kept for good.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._async import lock as lock_shell
from redlease._core import lock as lock_core
from redlease._core.scripts import Script
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


async def unexpiring(client: redis.asyncio.Redis) -> list[bytes]:
    """The keys of the server that have no expiry."""
    return sorted([key async for key in client.scan_iter() if await client.pttl(key) == -1])


async def kept_for_good(client: redis.asyncio.Redis) -> dict[str, list[bytes]]:
    """For each way a rebuild can go, the keys left without an expiry."""
    found: dict[str, list[bytes]] = {}

    @redlease.cached(client, ttl=30, lock_ttl=5, name="slow")
    async def slow(x: int) -> int:
        await AsyncTasks.sleep(0.3)
        return x

    assert await AsyncTasks.gather(*[lambda: slow(1)] * 4) == [1] * 4
    found["a crowd on a cold key"] = await unexpiring(client)

    await client.flushall()

    @redlease.cached(client, ttl=30, lock_ttl=5, name="failing")
    async def failing(x: int) -> int:
        await AsyncTasks.sleep(0.1)
        raise RuntimeError("the computation failed")

    outcomes = await AsyncTasks.gather(*[lambda: _outcome(lambda: failing(1))] * 3)
    assert all(isinstance(outcome, RuntimeError) for outcome in outcomes)
    found["a computation that raised"] = await unexpiring(client)

    await client.flushall()

    @redlease.cached(client, ttl=30, lock_ttl=5, name="stuck")
    async def stuck(x: int) -> int:
        await AsyncTasks.sleep(1.0)
        return x

    started = AsyncTasks.spawn(lambda: stuck(1))
    lock_key = b"redlease:{" + stuck.key_for(1) + b"}:lock"
    assert await wait_until(lambda: _exists(client, lock_key), limit=10.0)
    found["a rebuild in flight (a process dying there)"] = await unexpiring(client)
    assert await AsyncTasks.outcome(started) == 1
    return found


async def _outcome(call: Any) -> Any:
    try:
        return await call()
    except Exception as exc:
        return exc


async def _exists(client: redis.asyncio.Redis, key: bytes) -> bool:
    return bool(await client.exists(key))


def drop_expiry_on_acquisition(monkeypatch: pytest.MonkeyPatch) -> None:
    """The lock scripts as they were: each new fence is SET without KEEPTTL."""
    kept = "string.format('%d', issued), 'KEEPTTL')"
    for name in ("RELEASE", "LEAVE"):
        monkeypatch.setattr(lock_shell, name, _without(getattr(lock_core, name), kept))
    acquire = lock_core.ACQUIRE[lock_core.FAIR]
    monkeypatch.setitem(lock_core.ACQUIRE, lock_core.FAIR, _without(acquire, kept))


def _without(script: Script, kept: str) -> Script:
    assert kept in script.source
    source = script.source.replace(kept, "string.format('%d', issued))")
    return Script(script.name, source, hashlib.sha1(source.encode()).hexdigest())


@pytest.mark.parametrize("scripts", ["fixed", "broken"])
async def test_no_key_is_kept_for_good_after_a_crowd_a_failure_or_a_crash(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch, scripts: str
) -> None:
    if scripts == "broken":
        drop_expiry_on_acquisition(monkeypatch)
    found = await kept_for_good(async_client)
    if scripts == "fixed":
        assert all(keys == [] for keys in found.values()), found
    else:  # the check catches the counters the old scripts left behind, in every case
        assert all(keys and all(key.endswith(b":fence") for key in keys) for keys in found.values())
        assert len(found) == 3
