"""The buyer processes: each runs concurrent asyncio buyers of the strategy the parent asks
for, all processes starting at one instant; and the crew the parent drives them with."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import queue
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from harness.spawn import now_ns, reap

from suites.inventory.strategies import operation

_REPLY_WAIT = 60.0  # longest the parent waits for one measurement's reports beyond its length


def now() -> float:
    """Seconds on the system-wide monotonic clock (comparable across processes on Linux)."""
    return now_ns() / 1e9


@dataclass
class Measure:
    """One process's figures for one strategy in one round."""

    ops: int = 0
    retries: int = 0
    latencies: list[float] = field(default_factory=list)  # ms, a sample
    done: int = 0  # operations completed, warm-up included
    cpu: float = 0.0  # seconds of this process's CPU over the same time


async def _measure(
    op: Any, concurrency: int, start: float, warmup: float, seconds: float
) -> Measure:
    begin, end = start + warmup, start + warmup + seconds
    result = Measure()

    async def buyer(task: int) -> None:
        n = 0
        while True:
            t0 = now()
            if t0 >= end:
                return
            retries = await op(task, n)
            t1 = now()
            n += 1
            result.done += 1
            if t0 >= begin and t1 <= end:
                result.ops += 1
                result.retries += retries
                if len(result.latencies) < 20_000:  # a bounded sample
                    result.latencies.append((t1 - t0) * 1000)

    await asyncio.sleep(max(0.0, start - now()))
    cpu = time.process_time()
    await asyncio.gather(*(buyer(task) for task in range(concurrency)))
    result.cpu = time.process_time() - cpu
    return result


def buyer_process(
    index: int, url: str, run: str, concurrency: int, inbox: Any, outbox: Any
) -> None:
    """One buyer process: measure each strategy the parent asks for, until told to stop."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        asyncio.run(_serve(index, url, run, concurrency, inbox, outbox))
    except Exception as exc:
        outbox.put(("error", index, f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


async def _serve(index: int, url: str, run: str, concurrency: int, inbox: Any, outbox: Any) -> None:
    import redis.asyncio

    import redlease.asyncio

    client = redis.asyncio.Redis.from_url(url, socket_timeout=10.0, socket_connect_timeout=5.0)
    try:
        # Open every connection now (ours and redlease's pool), not while measuring.
        warm = redlease.asyncio.Inventory(client, f"bench:{run}:warm-up")
        await asyncio.gather(*(client.ping() for _ in range(concurrency)))
        await asyncio.gather(*(warm.snapshot() for _ in range(concurrency)))
        outbox.put(("ready", index))
        while True:
            command = await asyncio.to_thread(inbox.get, True, 600.0)
            if command is None:
                return
            name, sha, start, warmup, seconds = command
            op = operation(name, client, run, index, sha)
            outbox.put(("done", index, await _measure(op, concurrency, start, warmup, seconds)))
    finally:
        await client.aclose()


class Crew:
    """The buyer processes, their inboxes and the shared outbox."""

    def __init__(self, url: str, run: str, processes: int, concurrency: int) -> None:
        """Spawn the processes and wait (bounded) until each is connected and ready."""
        ctx = mp.get_context("spawn")
        self.inboxes = [ctx.Queue() for _ in range(processes)]
        self.outbox: Any = ctx.Queue()
        self.procs = [
            ctx.Process(
                target=buyer_process,
                args=(i, url, run, concurrency, self.inboxes[i], self.outbox),
                daemon=True,
            )
            for i in range(processes)
        ]
        for proc in self.procs:
            proc.start()
        self._collect("ready", 60.0)

    def measure(self, name: str, sha: str, warmup: float, seconds: float) -> list[Measure]:
        """Run strategy ``name`` in every process at once; their figures."""
        start = now() + 0.2  # every process starts at the same moment
        for inbox in self.inboxes:
            inbox.put((name, sha, start, warmup, seconds))
        return [m[2] for m in self._collect("done", warmup + seconds + _REPLY_WAIT)]

    def _collect(self, kind: str, limit: float) -> list[tuple[Any, ...]]:
        """One ``kind`` message from every process within ``limit`` seconds."""
        deadline = time.monotonic() + limit
        got: list[tuple[Any, ...]] = []
        while len(got) < len(self.procs):
            try:
                message = self.outbox.get(timeout=0.2)
            except queue.Empty:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"buyer processes did not report {kind!r} in time") from None
                dead = [p.exitcode for p in self.procs if p.exitcode not in (None, 0)]
                if dead:
                    raise RuntimeError(f"a buyer process exited with code {dead[0]}") from None
                continue
            if message[0] == "error":
                raise RuntimeError(f"buyer process {message[1]} failed: {message[2]}")
            if message[0] == kind:
                got.append(message)
        return got

    def stop(self) -> None:
        """Tell every process to exit; terminate those that do not (bounded waits)."""
        for inbox in self.inboxes:
            with contextlib.suppress(Exception):
                inbox.put(None)
        reap(self.procs, grace=5.0)
