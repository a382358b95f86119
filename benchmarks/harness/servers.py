"""Servers: private ones started and always stopped, and what the benchmarks read from a
server (its name, its command counters) or clean up on one they did not start."""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any


def topology() -> ModuleType:
    """``tests.topology`` (Redis Cluster and Sentinel groups on 127.0.0.1): the tests' support,
    not installed with redlease, so the repository's root is put on ``sys.path`` for it."""
    root = str(Path(__file__).resolve().parents[2])
    if root not in sys.path:
        sys.path.append(root)
    return importlib.import_module("tests.topology")


def start_servers(count: int) -> list[Any]:
    """``count`` private servers (all stopped again if one fails to start): the tests' servers
    (``tests.topology.RedisServer``), which can be paused."""
    servers: list[Any] = []
    try:
        for _ in range(count):
            servers.append(topology().RedisServer().start())
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


@contextlib.contextmanager
def url_or_private(url: str | None) -> Iterator[str]:
    """``url``, or the URL of a private server (default settings) stopped on the way out."""
    if url is not None:
        yield url
        return
    from redlease.server import RedisServer

    server = RedisServer().start()
    try:
        yield server.url
    finally:
        server.stop()


def server_name(info: dict[str, Any]) -> str:
    """``redis 7.0.15`` or ``valkey 8.0.1``, from INFO server."""
    return (
        f"{'valkey' if 'valkey_version' in info else 'redis'}"
        f" {info.get('valkey_version') or info.get('redis_version')}"
    )


def commands_processed(probe: Any) -> int:
    """The server's ``total_commands_processed`` (a script's own commands count too)."""
    return int(probe.info("stats")["total_commands_processed"])


def calls(stats: dict[str, Any], command: str) -> int:
    """Calls of ``command`` in an ``INFO commandstats`` reply (0 if never called)."""
    return int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))


def command_calls(probes: list[Any]) -> dict[str, int]:
    """``INFO commandstats`` calls per command, summed over ``probes`` (one per server)."""
    total: dict[str, int] = {}
    for probe in probes:
        for key, stats in probe.info("commandstats").items():
            name = key.removeprefix("cmdstat_")
            total[name] = total.get(name, 0) + int(stats["calls"])
    return total


def delete_run_keys(url: str, run_id: str) -> None:
    """On a server we did not start: delete this run's keys (redlease's fence keys persist)."""
    import redis

    with contextlib.suppress(Exception):
        client = redis.Redis.from_url(url, socket_timeout=5)
        try:
            batch = []
            for key in client.scan_iter(match=f"*bench:{run_id}:*", count=1000):
                batch.append(key)
                if len(batch) >= 500:
                    client.delete(*batch)
                    batch.clear()
            if batch:
                client.delete(*batch)
        finally:
            client.close()
