#!/usr/bin/env python
"""Inventory benchmark: reservations per second, atomic vs lock vs WATCH, against a floor.

    .venv/bin/python benchmarks/inventory.py              # full run (about a minute)
    .venv/bin/python benchmarks/inventory.py --quick      # smoke run (about 20 s)
    .venv/bin/python benchmarks/inventory.py --url redis://127.0.0.1:6379 --json out.json

Several buyer processes, each running the same number of concurrent buyers (asyncio tasks),
take one unit at a time from one stock that never runs out, for a fixed time, these ways:

``floor``   a bare ``EVALSHA`` of ``return 1`` with plain redis-py: one round trip, no work;
``seed``    ``EVALSHA`` of the minimal reservation script (:data:`SEED`: ``DECRBY`` if enough
            stock, nothing else) with plain redis-py: no holds, no order ids, no limits;
``seed-lean`` (diagnostic) the seed script sent the way redlease sends its own (its backend:
            a kept connection, no pool checkout per call): ``atomic / seed-lean`` is the cost of
            the reserve's work alone, the I/O path being the same;
``script``  (diagnostic) ``EVALSHA`` of redlease's reserve script with plain redis-py: the
            script's own cost, without redlease's Python layer (checks, pool, decoding);
``atomic``  ``redlease.asyncio.Inventory.reserve`` (per-buyer limit 1, a new buyer each time);
``lock``    ``redlease.asyncio.Lock`` around ``GET stock`` / ``SET stock-1`` (one lock handle
            per process, shared by its buyers: they queue locally, one at a time in Redis);
``watch``   ``WATCH`` / ``GET`` / ``MULTI`` / ``SET`` / ``EXEC``, retried on conflict.

Only operations that start and end inside the measured window count (after a warm-up). The
strategies are interleaved over several rounds (the order reversed every other round) and each
keeps its best round, so a noisy neighbour hurts all of them alike. Each row also shows the CPU
one reservation cost the buyer processes and (with a private server) the server. Targets,
judged on figures of this same run: atomic >= 10x lock (one round trip, no waiting), the floor
at most 1.2x atomic, and atomic at least 0.8x seed (all of the reserve's work costs at most a
fifth of the rate of the bare decrement). Every child process is reaped and every wait is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import json
import multiprocessing as mp
import os
import platform
import queue
import secrets
import signal
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

STRATEGIES = ("floor", "seed", "seed-lean", "script", "atomic", "lock", "watch")
TARGET_VS_LOCK = 10.0  # atomic / lock, at least
TARGET_FLOOR = 1.2  # floor / atomic, at most
TARGET_VS_SEED = 0.8  # atomic / seed, at least
SEED = """\
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
local qty = tonumber(ARGV[1])
if stock < qty then return -1 end
return redis.call('DECRBY', KEYS[1], qty)
"""
"""The minimal reservation: take ``qty`` units from a plain counter if there are enough."""
SEED_SHA = hashlib.sha1(SEED.encode()).hexdigest()
STOCK = 10**9  # never sold out
_REPLY_WAIT = 60.0  # longest the parent waits for one measurement's reports beyond its length


def now() -> float:
    """Seconds on the system-wide monotonic clock (comparable across processes on Linux)."""
    return time.clock_gettime(time.CLOCK_MONOTONIC)


@dataclass
class Measure:
    """One process's figures for one strategy in one round."""

    ops: int = 0
    retries: int = 0
    latencies: list[float] = field(default_factory=list)  # ms, a sample
    done: int = 0  # operations completed, warm-up included
    cpu: float = 0.0  # seconds of this process's CPU over the same time


@dataclass
class Figures:
    """One strategy's best round over all processes."""

    strategy: str
    per_second: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    retries: int = 0
    client_us: float = 0.0  # buyer processes' CPU per reservation (warm-up included), us
    server_us: float = 0.0  # the server's CPU per reservation (private server only), us
    rounds: list[float] = field(default_factory=list)  # reservations/s of every round


# -- the buyer processes ------------------------------------------------------------------------


def keys(run: str) -> dict[str, str]:
    """Names of the benchmark's keys (unique to the run)."""
    return {
        "stock": f"bench:{run}:stock",
        "lock": f"bench:{run}:lock",
        "inventory": f"bench:{run}",
    }


def _operation(name: str, client: Any, run: str, index: int, sha: str) -> Any:
    """The coroutine function ``op(task, n) -> retries`` that takes one unit, for ``name``."""
    import redis.exceptions

    import redlease.asyncio

    k = keys(run)
    if name == "floor":

        async def floor(task: int, n: int) -> int:
            await client.evalsha(sha, 0)
            return 0

        return floor
    if name == "seed":

        async def seed(task: int, n: int) -> int:
            assert await client.evalsha(SEED_SHA, 1, k["stock"], 1) >= 0
            return 0

        return seed
    if name == "seed-lean":
        from redlease._async.runtime import runtime_for
        from redlease._core.scripts import Script

        backend = runtime_for(client).backend
        script = Script("seed", SEED, SEED_SHA)
        stock = [k["stock"].encode()]

        async def seed_lean(task: int, n: int) -> int:
            assert await backend.run(script, stock, [1]) >= 0
            return 0

        return seed_lean
    if name == "script":
        from redlease._core.inventory import RESERVE, InventoryKeys

        names = InventoryKeys.build("redlease", k["inventory"].encode()).all

        async def script(task: int, n: int) -> int:
            buyer = f"{index}.{task}.{n}"
            reply = await client.evalsha(
                RESERVE.sha, len(names), *names, buyer, buyer, 1, 300_000, 1, 0
            )
            assert isinstance(reply, int), reply
            return 0

        return script
    if name == "atomic":
        inventory = redlease.asyncio.Inventory(client, k["inventory"])

        async def atomic(task: int, n: int) -> int:
            buyer = f"{index}.{task}.{n}"
            await inventory.reserve(user=buyer, order_id=buyer, hold=300.0, per_user_limit=1)
            return 0

        return atomic
    if name == "lock":
        lock = redlease.asyncio.Lock(client, k["lock"], ttl=5.0, timeout=30.0)

        async def locked(task: int, n: int) -> int:
            async with lock:
                stock = int(await client.get(k["stock"]))
                await client.set(k["stock"], stock - 1)
            return 0

        return locked
    if name == "watch":

        async def watch(task: int, n: int) -> int:
            retries = 0
            async with client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch(k["stock"])
                        stock = int(await pipe.get(k["stock"]))
                        pipe.multi()
                        pipe.set(k["stock"], stock - 1)
                        await pipe.execute()
                        return retries
                    except redis.exceptions.WatchError:
                        retries += 1

        return watch
    raise ValueError(name)


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
            op = _operation(name, client, run, index, sha)
            outbox.put(("done", index, await _measure(op, concurrency, start, warmup, seconds)))
    finally:
        await client.aclose()


# -- the parent ---------------------------------------------------------------------------------


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
        deadline, got = time.monotonic() + limit, []
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
        for proc in self.procs:
            proc.join(5)
            if proc.is_alive():
                proc.terminate()
                proc.join(5)


def percentile(ordered: list[float], p: float) -> float:
    """Nearest-rank percentile ``p`` of the sorted, non-empty ``ordered``."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def all_keys(run: str) -> list[bytes]:
    """Every key the benchmark writes (redlease's default prefix)."""
    from redlease._core.inventory import InventoryKeys
    from redlease._core.lock import LockKeys

    k = keys(run)
    lock = LockKeys.build("redlease", k["lock"].encode())
    inventory = InventoryKeys.build("redlease", k["inventory"].encode())
    return [k["stock"].encode(), lock.lock, lock.fence, lock.queue, lock.handoff, *inventory.all]


def reset(client: Any, run: str) -> None:
    """Fresh keys before a measurement: a full stock, no orders, no lock."""
    import redlease

    client.unlink(*all_keys(run))
    client.set(keys(run)["stock"], STOCK)
    redlease.Inventory(client, keys(run)["inventory"]).restock(STOCK)


def server_cpu(pid: int | None) -> float:
    """Seconds of CPU the server process ``pid`` has used (0.0 if unknown)."""
    if pid is None:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run(
    args: argparse.Namespace, url: str, label: str, server_pid: int | None = None
) -> dict[str, Any]:
    """Measure every strategy over ``args.rounds`` rounds; the figures and verdicts.

    ``server_pid``: the server's process (a private one), to report its CPU per reservation.
    """
    import redis

    load_before = _load()
    client = redis.Redis.from_url(url)
    run_id = secrets.token_hex(4)
    sha = client.script_load("return 1")
    from redlease._core.inventory import RESERVE

    client.script_load(RESERVE.source)
    client.script_load(SEED)
    figures = {name: Figures(name) for name in STRATEGIES}
    crew = Crew(url, run_id, args.processes, args.concurrency)
    try:
        for r in range(args.rounds):
            order = STRATEGIES if r % 2 == 0 else tuple(reversed(STRATEGIES))
            for name in order:
                reset(client, run_id)
                server_before = server_cpu(server_pid)
                measures = crew.measure(name, sha, args.warmup, args.seconds)
                server_used = server_cpu(server_pid) - server_before
                rate = sum(m.ops for m in measures) / args.seconds
                done = sum(m.done for m in measures) or 1
                fig = figures[name]
                fig.rounds.append(round(rate, 1))
                print(f"  round {r + 1}: {name:<7} {rate:>10,.0f} /s", file=sys.stderr, flush=True)
                if rate >= fig.per_second:
                    latencies = sorted(x for m in measures for x in m.latencies)
                    fig.per_second = round(rate, 1)
                    fig.p50_ms = round(percentile(latencies, 50), 3) if latencies else 0.0
                    fig.p99_ms = round(percentile(latencies, 99), 3) if latencies else 0.0
                    fig.retries = sum(m.retries for m in measures)
                    fig.client_us = round(sum(m.cpu for m in measures) / done * 1e6, 1)
                    fig.server_us = round(server_used / done * 1e6, 1)
    finally:
        crew.stop()
        with contextlib.suppress(Exception):
            client.unlink(*all_keys(run_id))
        client.close()
    atomic, lock, floor, seed, script, lean = (
        figures[n].per_second for n in ("atomic", "lock", "floor", "seed", "script", "seed-lean")
    )
    vs_lock = atomic / lock if lock else float("inf")
    vs_floor = floor / atomic if atomic else float("inf")
    vs_seed = atomic / seed if seed else 0.0
    return {
        "server": label,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "load": [load_before, _load()],
        "processes": args.processes,
        "concurrency": args.concurrency,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "strategies": [asdict(fig) for fig in figures.values()],
        "atomic_vs_lock": round(vs_lock, 2),
        "floor_vs_atomic": round(vs_floor, 3),
        "atomic_vs_seed": round(vs_seed, 3),
        "script_vs_seed": round(script / seed, 3) if seed else 0.0,
        "atomic_vs_seed_lean": round(atomic / lean, 3) if lean else 0.0,
        "atomic_vs_seed_cpu": _cpu_ratio(figures["seed"], figures["atomic"]),
        "atomic_vs_seed_lean_cpu": _cpu_ratio(figures["seed-lean"], figures["atomic"]),
        "pass_vs_lock": vs_lock >= TARGET_VS_LOCK,
        "pass_floor": vs_floor <= TARGET_FLOOR,
        "pass_vs_seed": vs_seed >= TARGET_VS_SEED,
    }


def _cpu_ratio(base: Figures, fig: Figures) -> float:
    """``base``'s CPU per reservation (buyers + server) over ``fig``'s: the ratio of their
    rates on a machine whose CPU is the limit, much steadier than the rates themselves on a
    shared machine (0.0 without the server's figure)."""
    mine = fig.client_us + fig.server_us
    if not (base.server_us and fig.server_us and mine):
        return 0.0
    return round((base.client_us + base.server_us) / mine, 3)


def _load() -> str:
    """The 1-minute load average, or '?'."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def report(result: dict[str, Any]) -> None:
    """Print the table and the verdicts."""
    print(
        f"inventory benchmark: {result['processes']} processes x {result['concurrency']} "
        f"concurrent buyers, {result['seconds']:g} s per measurement, best of "
        f"{result['rounds']} rounds\nserver: {result['server']}\nmachine: {result['machine']}; "
        f"load average {result['load'][0]} before, {result['load'][1]} after\n"
    )
    atomic = next(f for f in result["strategies"] if f["strategy"] == "atomic")["per_second"]
    rows = [
        (
            "strategy",
            "reservations/s",
            "p50 ms",
            "p99 ms",
            "retries",
            "vs atomic",
            "client CPU us",
            "server CPU us",
        )
    ]
    for fig in result["strategies"]:
        ratio = f"{fig['per_second'] / atomic:.2f}x" if atomic else "-"
        rows.append(
            (
                fig["strategy"],
                f"{fig['per_second']:,.0f}",
                f"{fig['p50_ms']:.2f}",
                f"{fig['p99_ms']:.2f}",
                f"{fig['retries']:,}",
                ratio,
                f"{fig['client_us']:.0f}",
                f"{fig['server_us']:.0f}" if fig["server_us"] else "-",
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True)]
        print("  " + "   ".join(cells))
    verdict = {True: "PASS", False: "FAIL"}
    print(
        f"\n  atomic / lock   {result['atomic_vs_lock']:>7.2f}x   target >= {TARGET_VS_LOCK:g}x"
        f"   {verdict[result['pass_vs_lock']]}"
        f"\n  floor / atomic  {result['floor_vs_atomic']:>7.2f}x   target <= {TARGET_FLOOR:g}x"
        f"   {verdict[result['pass_floor']]}"
        f"\n  atomic / seed   {result['atomic_vs_seed']:>7.2f}x   target >= {TARGET_VS_SEED:g}x"
        f"   {verdict[result['pass_vs_seed']]}   (script / seed {result['script_vs_seed']:.2f}x,"
        f" atomic / seed-lean {result['atomic_vs_seed_lean']:.2f}x)"
        f"\n  by CPU per reservation (buyers + server): atomic / seed "
        f"{result['atomic_vs_seed_cpu']:.2f}x, atomic / seed-lean "
        f"{result['atomic_vs_seed_lean_cpu']:.2f}x"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options, checked and bounded."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--url", help="use this server instead of starting one (redis://host:port)")
    p.add_argument("--quick", action="store_true", help="short smoke run")
    p.add_argument("--processes", type=int, default=4, help="buyer processes (default: 4)")
    p.add_argument(
        "--concurrency", type=int, default=8, help="concurrent buyers per process (default: 8)"
    )
    p.add_argument("--seconds", type=float, default=3.0, help="measured seconds (default: 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    p.add_argument("--json", metavar="FILE", help="write the figures to FILE")
    args = p.parse_args(argv)
    if not (1 <= args.processes <= 32 and 1 <= args.concurrency <= 256):
        p.error("--processes must be 1..32 and --concurrency 1..256")
    if not (0.1 <= args.seconds <= 60 and 1 <= args.rounds <= 10):
        p.error("--seconds must be 0.1..60 and --rounds 1..10")
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    args.warmup = min(0.5, args.seconds / 2)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 0 if every target passes, 1 otherwise."""
    args = parse_args(argv)
    server = None
    url = args.url
    label = url or ""
    if url is None:
        from redlease.server import RedisServer, find_server_binary

        binary = find_server_binary()
        server = RedisServer(binary=binary).start()
        url = server.url
        label = f"a private {os.path.basename(binary)} {server.version} at {url}, defaults"
    try:
        result = run(args, url, label, server.pid if server is not None else None)
    finally:
        if server is not None:
            server.stop()
    report(result)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    passed = result["pass_vs_lock"] and result["pass_floor"] and result["pass_vs_seed"]
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
