"""Helpers shared by the topologies: admin connections, bounded polling, parallel starts."""

from __future__ import annotations

import atexit
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol, TypeVar

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from redlease.server import HOST
from tests.topology.server import TLSFiles

READY_TIMEOUT = 30.0  # seconds a topology gets to become healthy (start, heal)
FAILOVER_TIMEOUT = 30.0  # seconds a failover gets to complete
_POLL = 0.05  # seconds between two polls of a condition

T = TypeVar("T")


class TopologyError(RuntimeError):
    """A topology did not reach the expected state in time; the message says what is missing."""


def probe(port: int, tls: TLSFiles | None = None) -> redis.Redis:
    """A short-timeout, no-retry client for admin commands (a dead node fails fast)."""
    return redis.Redis(
        host=HOST,
        port=port,
        socket_timeout=2.0,
        socket_connect_timeout=1.0,
        retry=Retry(NoBackoff(), 0),
        decode_responses=True,
        **(tls.client_kwargs() if tls else {}),
    )


def poll(what: str, check: Callable[[], T | None], timeout: float) -> T:
    """Call ``check`` until it returns a non-None value; TopologyError after ``timeout``.

    ``check`` returns None while not done; Redis/OS errors count as "not yet" (a node that is
    restarting refuses connections). The last error is named in the timeout message.
    """
    deadline = time.monotonic() + timeout
    last_error: BaseException | None = None
    while True:
        try:
            result = check()
            if result is not None:
                return result
        except (redis.RedisError, OSError) as exc:
            last_error = exc
        if time.monotonic() > deadline:
            detail = f" (last error: {last_error!r})" if last_error else ""
            raise TopologyError(f"timed out after {timeout:g}s waiting for {what}{detail}")
        time.sleep(_POLL)


def parallel(calls: Iterable[Callable[[], Any]]) -> None:
    """Run the calls in threads (process start-ups are I/O waits) and re-raise the first error."""
    calls = list(calls)
    if not calls:
        return
    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        for future in [pool.submit(call) for call in calls]:
            future.result()


def replica_synced(port: int) -> bool:
    """True if the server on ``port`` is a replica whose link is up and not in a full sync."""
    with probe(port) as conn:
        info = conn.info("replication")
    return (
        info.get("role") == "slave"
        and info.get("master_link_status") == "up"
        and not info.get("master_sync_in_progress")
    )


class _Closeable(Protocol):
    def close(self) -> None: ...


LIVE: set[_Closeable] = set()
"""Topologies with running processes; closed at interpreter exit (before RedisServer's own
hook, which would kill the processes but not in a useful order)."""


@atexit.register
def _close_all() -> None:
    for topology in list(LIVE):
        topology.close()
