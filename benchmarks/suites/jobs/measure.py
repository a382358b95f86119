"""What every section of the jobs benchmark shares: its rows, the clients that count their
round trips, and the interleaved rounds that time the rows and count their commands.

A row is one operation timed call by call: a plain function or a coroutine function (awaited
on the run's loop, each await timed inside one coroutine, so the loop's own cost is not in
the figure). A row that needs something made before each call (a job enqueued, to be run)
has ``prepare(n)``, called before each round, untimed and uncounted.

Round trips are counted on the client: every ``send_packed_command`` of a connection made by
:func:`sync_client`, every write to the socket of one made by :func:`async_pool` (a pipeline
is one). Commands are counted on the
server: ``INFO commandstats`` before and after each round, the INFO calls left out, commands
that scripts run included. Both per call, over the timed rounds (a background renewal that
falls into a round counts too: rare, and said in the README).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
import redis.asyncio
from harness.report import error_text
from harness.servers import command_calls
from harness.timing import alternate, pct

SENDS = [0]  # round trips of every counting connection of the process


class CountingConnection(redis.connection.Connection):
    """A redis-py connection counting what it sends (one count per round trip)."""

    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        SENDS[0] += 1
        super().send_packed_command(command, check_health)


class _CountingWriter:
    """An asyncio stream writer counting its writes (redlease's asyncio layer writes to the
    connection's writer itself, not through ``send_packed_command``)."""

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def write(self, data: Any) -> None:
        SENDS[0] += 1
        self._writer.write(data)

    def writelines(self, data: Any) -> None:
        SENDS[0] += 1
        self._writer.writelines(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._writer, name)


class AsyncCountingConnection(redis.asyncio.connection.Connection):
    """The asyncio twin of :class:`CountingConnection`: one count per write to its socket."""

    async def _connect(self) -> None:
        await super()._connect()
        self._writer = _CountingWriter(self._writer)


def sync_client(url: str) -> redis.Redis:
    """A redis-py client whose round trips are counted."""
    return redis.Redis.from_url(url, connection_class=CountingConnection)


def async_pool(url: str) -> redis.asyncio.ConnectionPool:
    """An asyncio connection pool whose round trips are counted."""
    return redis.asyncio.ConnectionPool.from_url(url, connection_class=AsyncCountingConnection)


@dataclass
class Row:
    """One timed operation: ``label`` in ``section``, compared with the row ``bare`` (a label
    of the same section) when it is glue."""

    section: str
    label: str
    step: Callable[[], Any]
    bare: str | None = None
    prepare: Callable[[int], Any] | None = None
    samples: list[int] = field(default_factory=list)
    sends: int = 0
    commands: dict[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.section}: {self.label}"


def _run(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> Any:
    result = fn(*args)
    return loop.run_until_complete(result) if inspect.isawaitable(result) else result


async def _awaits(step: Callable[[], Any], calls: int, out: list[int]) -> None:
    clock = time.perf_counter_ns
    for _ in range(calls):
        started = clock()
        await step()
        out.append(clock() - started)


def _calls(
    loop: asyncio.AbstractEventLoop, row: Row, calls: int, out: list[int], prepare: bool = True
) -> None:
    if prepare and row.prepare is not None:
        _run(loop, row.prepare, calls)
    if inspect.iscoroutinefunction(row.step):
        loop.run_until_complete(_awaits(row.step, calls, out))
        return
    clock = time.perf_counter_ns
    step = row.step
    for _ in range(calls):
        started = clock()
        step()
        out.append(clock() - started)


def _counted(loop: asyncio.AbstractEventLoop, row: Row, calls: int, probe: redis.Redis) -> None:
    """One round of ``row``, its round trips and the server's commands added to the row."""
    if row.prepare is not None:
        _run(loop, row.prepare, calls)
    before, sent = command_calls([probe]), SENDS[0]
    _calls(loop, row, calls, row.samples, prepare=False)
    sent, after = SENDS[0] - sent, command_calls([probe])
    row.sends += sent
    for name, count in after.items():
        if name != "info" and count != before.get(name, 0):
            row.commands[name] = row.commands.get(name, 0) + count - before.get(name, 0)


def measure(
    loop: asyncio.AbstractEventLoop,
    rows: list[Row],
    probe: redis.Redis,
    calls: int,
    rounds: int,
    warm: int,
    errors: dict[str, str],
) -> None:
    """Warm every row up, then ``rounds`` rounds of ``calls`` calls of each, the order
    reversed every other round, so that bursts of load on the machine hit every row alike.
    A row that raises is dropped from ``rows``, its error kept in ``errors``."""
    for round_no in range(-1, rounds):
        for row in alternate(list(rows), max(round_no, 0)):
            try:
                if round_no < 0:
                    _calls(loop, row, warm, [])
                else:
                    _counted(loop, row, calls, probe)
            except Exception as exc:
                errors[row.key] = error_text(exc)
                rows.remove(row)


def figures(row: Row) -> dict[str, Any]:
    """The row's p50/p99 (us), round trips and server commands per call."""
    values = sorted(row.samples)
    calls = len(values) or 1
    return {
        "p50_us": pct(values, 50) / 1000,
        "p99_us": pct(values, 99) / 1000,
        "calls": len(values),
        "round_trips": row.sends / calls,
        "commands": sum(row.commands.values()) / calls,
        "by_command": {k: v / calls for k, v in sorted(row.commands.items())},
    }
