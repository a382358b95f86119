"""Operating redlease, where sync and asyncio differ or a process of its own is needed: the
logger is silent unless configured, and an event loop's end closes what ``close()`` was not
called for."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease.asyncio
from redlease import _synchronization
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)

LOSE_A_LEASE = """
import sys, threading, redis, redlease
{configure}
r = redis.Redis(port=int(sys.argv[1]))
lost = threading.Event()
lock = redlease.Lock(r, "silent", ttl=0.3, on_lost=lost.set)
assert lock.acquire()
r.delete(b"redlease:{{silent}}:lock")  # taken away: the next renewal finds it gone
assert lost.wait(10)
redlease.close(r)
r.close()
"""


def lose_a_lease(port: int, configure: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", LOSE_A_LEASE.format(configure=configure), str(port)],
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_logger_is_silent_unless_the_application_configures_logging(
    server: RedisServer,
) -> None:
    result = lose_a_lease(server.port, configure="")
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""  # a lost lease is a WARNING: Python's last resort would print it
    assert any(isinstance(h, logging.NullHandler) for h in logging.getLogger("redlease").handlers)


def test_configured_logging_shows_the_lost_lease(server: RedisServer) -> None:
    """The twin: the same run with logging configured prints the warning."""
    result = lose_a_lease(server.port, configure="import logging; logging.basicConfig()")
    assert result.returncode == 0, result.stderr
    assert "WARNING:redlease:lock 'silent' lost its lease (fence " in result.stderr


def connections(srv: RedisServer) -> int:
    with srv.client(client_name="test-admin") as admin:
        return sum(1 for c in admin.client_list() if c["name"] != "test-admin")


def run_a_loop_without_close(srv: RedisServer) -> list[str]:
    """``asyncio.run()`` of a program that never calls close(); redlease's tasks at its end."""
    tasks: list[str] = []

    async def main() -> None:
        client = redis.asyncio.Redis(host=srv.host, port=srv.port)
        async with redlease.asyncio.Lock(client, "loop-end") as held:
            assert held.fence >= 1
        tasks.extend(t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task())
        await client.aclose()

    asyncio.run(main())
    return tasks


def test_the_end_of_an_event_loop_closes_what_close_was_not_called_for(
    make_server: Any,
) -> None:
    srv = make_server()
    assert "redlease-renewer" in run_a_loop_without_close(srv)  # still there when main ends
    assert connections(srv) == 0


def test_without_the_loop_end_hook_a_connection_is_left(
    make_server: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The twin: with the hook disabled (as before issue 13), the connection stays open."""

    def never(self: Any, cleanup: Any) -> None:
        self._cleanup = None

    monkeypatch.setattr(_synchronization.AsyncAtShutdown, "__init__", never)
    srv = make_server()
    run_a_loop_without_close(srv)
    # Left open at the server. (-X dev also printed ResourceWarnings for it, at interpreter
    # exit: since redlease keeps its idle connections, redis-py 8's pool bookkeeping keeps
    # them reachable until then, so a gc.collect() here no longer shows them.)
    assert connections(srv) >= 1
    monkeypatch.undo()


def test_sync_close_does_not_wait_out_the_watchdog(make_server: Any) -> None:
    """redlease.close() returns at once: the sleeping watchdog thread is woken, not waited for."""
    srv = make_server()
    client = redis.Redis(host=srv.host, port=srv.port)
    lock = redlease.Lock(client, "quick", ttl=10.0)
    assert lock.acquire()
    lock.release()
    started = time.monotonic()
    redlease.close(client)
    assert time.monotonic() - started < 1.0  # the watchdog lingers 1 s when left alone
    client.close()
