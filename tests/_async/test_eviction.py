"""A server that may evict keys is reported, once per client (asyncio;
tests/_sync/test_eviction.py is generated).

redlease reads ``maxmemory-policy`` on the first connection to a server (part of its
handshake, no round trip on later calls) and logs one WARNING, ``eviction_possible``, when the
policy is not ``noeviction``. A user not allowed CONFIG gets no error.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease.acl import acl_rules
from tests.support import AsyncTasks
from tests.topology import ACLUser, RedisServer

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(autouse=True)
def debug(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="redlease")


def events(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "redlease_event", "") == event]


async def use(client: redis.asyncio.Redis) -> None:
    """A few calls on several connections: two locks held at once, then again."""
    for _ in range(2):
        first, second = redlease.Lock(client, "ev:a"), redlease.Semaphore(client, "ev:b", 2)
        async with first, second:
            await AsyncTasks.run(lambda: redlease.Lock(client, "ev:c").acquire(blocking=False))


def client_of(library: str, host: str, port: int, **kwargs: Any) -> Any:
    """A redis-py or valkey-py client (valkey-py's errors are other classes)."""
    if library == "valkey":
        valkey = pytest.importorskip("valkey.asyncio")
        return valkey.Valkey(host=host, port=port, **kwargs)
    return redis.asyncio.Redis(host=host, port=port, **kwargs)


@pytest.mark.parametrize("library", ["redis", "valkey"])
@pytest.mark.parametrize("policy", ["allkeys-lru", "volatile-lru"])
async def test_a_server_that_may_evict_is_reported_once_per_client(
    make_server: Any, caplog: pytest.LogCaptureFixture, policy: str, library: str
) -> None:
    srv = make_server(config={"maxmemory-policy": policy, "maxmemory": "100mb"})
    for _ in range(2):  # each client is told once
        client = client_of(library, srv.host, srv.port)
        try:
            await use(client)
        finally:
            await redlease.close(client)
            await client.aclose()
    warned = events(caplog, "eviction_possible")
    assert len(warned) == 2 and all(r.levelno == logging.WARNING for r in warned)
    record = warned[0]
    assert record.redlease_policy == policy  # type: ignore[attr-defined]
    assert record.redlease_server == f"{srv.host}:{srv.port}/0"  # type: ignore[attr-defined]
    message = record.getMessage()
    assert policy in message and "noeviction" in message and "second client" in message
    if policy.startswith("volatile-"):
        assert "every lease" in message


async def test_twin_noeviction_is_not_reported(
    async_client: redis.asyncio.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    """The twin: the same calls on a server with the default policy (noeviction) log
    nothing, so the warning above is the policy's, read and judged."""
    policy = (await async_client.config_get("maxmemory-policy"))["maxmemory-policy"]
    assert policy in (b"noeviction", "noeviction")
    fresh = redis.asyncio.Redis(
        host=async_client.connection_pool.connection_kwargs["host"],
        port=async_client.connection_pool.connection_kwargs["port"],
    )
    try:
        await use(fresh)
    finally:
        await redlease.close(fresh)
        await fresh.aclose()
    assert events(caplog, "eviction_possible") == []
    assert events(caplog, "eviction_unknown") == []


@pytest.mark.parametrize("library", ["redis", "valkey"])
async def test_a_user_not_allowed_config_gets_no_error(
    server: RedisServer,
    make_acl_user: Callable[..., ACLUser],
    caplog: pytest.LogCaptureFixture,
    library: str,
) -> None:
    user = make_acl_user("redlease-noconfig", acl_rules())
    client = client_of(library, server.host, server.port, **user.kwargs())
    try:
        with pytest.raises(Exception, match=r"(?i)permission"):
            await client.config_get("maxmemory-policy")  # the rules do not allow CONFIG
        await use(client)  # works, raises nothing
    finally:
        await redlease.close(client)
        await client.aclose()
    assert events(caplog, "eviction_possible") == []
    [unknown] = events(caplog, "eviction_unknown")  # once, and only at DEBUG
    assert unknown.levelno == logging.DEBUG
