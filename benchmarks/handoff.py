#!/usr/bin/env python
"""Hand-off benchmark: redlease against redis-py's Lock and python-redis-lock, in one run.

    .venv/bin/python benchmarks/handoff.py              # full run (about 2-3 minutes)
    .venv/bin/python benchmarks/handoff.py --quick      # smoke run (about 40 s)
    .venv/bin/python benchmarks/handoff.py --url redis://127.0.0.1:6379 --json out.json

Four measurements, each for every library, all against one server started here
(``redlease.server.RedisServer`` with default settings) unless ``--url`` is given:

1. uncontended acquire+release latency, interleaved with a raw floor
   (``SET key token NX PX`` + ``EVALSHA`` compare-and-delete with plain redis-py);
2. N worker processes hammering one lock: throughput, hand-off latency between processes,
   longest wait, per-process spread, and a mutual-exclusion check;
3. Redis commands per second per blocked waiter while the lock is held;
4. crash recovery: the holder is SIGKILLed, how long until an already-waiting process has it.

Targets are judged with ratios of figures measured in this same run. See benchmarks/README.md.
Every child process is reaped and every wait is bounded; a library that fails is reported as
an error row.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import platform
import secrets
import signal
import sys
import time
import traceback
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from _common import (
    CAD_SCRIPT,
    Op,
    Progress,
    acquire_release,
    add_errors,
    close_loop,
    collect,
    cpu_figures,
    cpu_s,
    decode_holds,
    delete_run_keys,
    error_row,
    error_text,
    exclusion_figures,
    exclusion_verdict,
    fmt,
    handoff_figures,
    interrupt_on_sigterm,
    latency_rows,
    load_average,
    new_flag,
    now_ns,
    per_process_counts,
    pick_libs,
    print_header,
    print_section,
    print_table,
    print_violations,
    reap,
    reap_all,
    run_contenders,
    server_name,
    spread_figures,
    start_child,
    throughput_figures,
    time_interleaved,
    verdict,
    wait_events,
    wait_figures,
    wait_flag,
    wait_for_start,
    wait_once,
    worker_errors,
    write_json,
)

# -- libraries under test ------------------------------------------------------------------

LIBS: dict[str, str] = {
    "redlease": "redlease Lock",
    "redlease-async": "redlease.asyncio Lock",
    "redlease-barging": "redlease Lock(fair=False)",
    "redis-py": "redis-py Lock (sleep=0.1)",
    "redlease-compat": "redis-py's API on redlease (lock_class=redlease.compat.Lock)",
    "python-redis-lock": "python-redis-lock",
    "fifo-floor": "floor: one token, BLPOP/RPUSH",
}
ASYNC_LIBS = {"redlease-async"}
DIAG_NORENEW = "redlease-norenew"  # section 1 only: redlease.Lock(renew=False), a diagnostic row

# Targets (all ratios of figures from the same run).
TARGET_UNCONTENDED = 1.05  # redlease p50 / raw floor p50 (asyncio: / the redis.asyncio floor)
TARGET_WAIT_CMDS = 0.0  # redlease commands per second per blocked waiter
TARGET_RECOVERY_SLACK = 0.050  # s: kill -> acquire within ttl + this
JOIN_AT = 0.4  # crash test: the waiter starts waiting this fraction of the ttl after the holder


def make_sync_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    """A lock object with ``acquire()`` / ``release()``: each library with its defaults."""
    if lib == "redlease":
        import redlease

        return redlease.Lock(client, name, ttl=ttl)
    if lib == "redlease-barging":
        import redlease

        return redlease.Lock(client, name, ttl=ttl, fair=False)
    if lib == "redis-py":
        return client.lock(name, timeout=ttl)
    if lib == "redlease-compat":
        import redlease.compat

        return client.lock(name, timeout=ttl, lock_class=redlease.compat.Lock)
    if lib == "python-redis-lock":
        import redis_lock

        return redis_lock.Lock(client, name, expire=int(ttl))
    if lib == "fifo-floor":
        return FifoFloor(client, name)
    raise ValueError(f"unknown sync library {lib!r}")


class FifoFloor:
    """The floor of a fair hand-off on this machine: not a lock library but one token in a
    Redis list, taken with BLPOP (Redis serves blocked clients first come, first served) and
    put back with RPUSH. No lease, no fence, no crash recovery: one command per side and one
    wake-up of the waiting process. Its longest wait in section 2 is what the scheduler of
    this machine alone costs a FIFO queue of N processes (for ``--sections 2``)."""

    def __init__(self, client: Any, name: str) -> None:
        self._client = client
        self._key = f"{name}:fifo"
        if client.set(f"{name}:fifo-init", 1, nx=True):  # the first process puts the token
            client.rpush(self._key, b"t")

    def acquire(self) -> bool:
        self._client.blpop([self._key], 0)
        return True

    def release(self) -> None:
        self._client.rpush(self._key, b"t")


def make_async_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    if lib == "redlease-async":
        import redlease.asyncio

        return redlease.asyncio.Lock(client, name, ttl=ttl)
    raise ValueError(f"unknown asyncio library {lib!r}")


def lease_key(lib: str, name: str) -> str:
    """The Redis key whose PTTL is the holder's lease, per library."""
    if lib in ("redlease", "redlease-async", "redlease-barging", "redlease-compat"):
        return f"redlease:{{{name}}}:lock"
    if lib == "redis-py":
        return name
    if lib == "python-redis-lock":
        return f"lock:{name}"
    raise ValueError(lib)


# A URL ``redis+cluster://host:port`` names a Redis Cluster by one of its nodes: the clients
# built for it are ``RedisCluster`` clients (they learn the other nodes from that one). Only
# what goes through Side (the lock processes) understands it; benchmarks/cluster.py uses it.
CLUSTER_SCHEME = "redis+cluster://"  # the CLI's form (redlease --url redis+cluster://...)


def cluster_url(node_url: str) -> str:
    """The cluster URL naming the cluster of the node at ``node_url`` (``redis://h:p``)."""
    return CLUSTER_SCHEME + node_url.split("://", 1)[1]


def _node_url(url: str) -> str:
    return "redis://" + url[len(CLUSTER_SCHEME) :]


def sync_client(url: str) -> Any:
    """A sync client for ``url``: ``redis.Redis``, or ``RedisCluster`` for ``redis+cluster://``."""
    if url.startswith(CLUSTER_SCHEME):
        import redis.cluster

        return redis.cluster.RedisCluster.from_url(_node_url(url))
    import redis

    return redis.Redis.from_url(url)


def async_client(url: str) -> Any:
    """The asyncio client for ``url`` (``redis.asyncio.cluster.RedisCluster`` for a cluster)."""
    if url.startswith(CLUSTER_SCHEME):
        import redis.asyncio.cluster

        return redis.asyncio.cluster.RedisCluster.from_url(_node_url(url))
    import redis.asyncio

    return redis.asyncio.Redis.from_url(url)


class Side:
    """One library in one process: its client, plus a private event loop for asyncio.

    asyncio locks belong to the task that acquired them, so every acquire+release pair of an
    asyncio library runs inside one coroutine (one task); sync libraries are called directly.
    """

    def __init__(self, lib: str, url: str) -> None:
        self.lib = lib
        self.is_async = lib in ASYNC_LIBS
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self.loop = asyncio.new_event_loop()
            self.client = self.loop.run_until_complete(_async_make(url))
        else:
            self.client = sync_client(url)

    def lock(self, name: str, ttl: float) -> Any:
        if self.is_async:
            return make_async_lock(self.lib, self.client, name, ttl)
        return make_sync_lock(self.lib, self.client, name, ttl)

    def ready(self, name: str, ttl: float, events: Any, wid: int) -> Any:
        """Warm up (on another lock), then the lock to measure; reported ready on ``events``."""
        warm_up(self, name)
        lock = self.lock(name, ttl)
        events.put(("ready", wid))
        return lock

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def once(self, lock: Any, hold: Any = None, hold_s: float = 0.0, on_held: Any = None) -> tuple:
        """Acquire (blocking, library defaults), optionally hold until the flag ``hold`` is set
        (at most ``hold_s`` seconds, the loop keeps running), release.

        Returns ``(t_call, t_acq, ok)`` on the system-wide monotonic clock.
        """
        if self.is_async:
            return self.run(self._once_async(lock, hold, hold_s, on_held))
        t_call = now_ns()
        ok = bool(lock.acquire())
        t_acq = now_ns()
        if on_held is not None:
            on_held(t_call, t_acq, ok)
        if hold is not None:
            end = time.monotonic() + hold_s
            while time.monotonic() < end and not hold.value:
                time.sleep(0.02)
        if ok:
            lock.release()
        return t_call, t_acq, ok

    async def _once_async(self, lock: Any, hold: Any, hold_s: float, on_held: Any) -> tuple:
        t_call = now_ns()
        ok = bool(await lock.acquire())
        t_acq = now_ns()
        if on_held is not None:
            on_held(t_call, t_acq, ok)
        if hold is not None:
            end = time.monotonic() + hold_s
            while time.monotonic() < end and not hold.value:
                await asyncio.sleep(0.02)  # the loop runs: watchdog and hub keep working
        if ok:
            await lock.release()
        return t_call, t_acq, ok

    def close(self) -> None:
        if self.loop is None:
            with contextlib.suppress(Exception):
                self.client.close()
            return
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(asyncio.wait_for(self.client.aclose(), 5))
        close_loop(self.loop)
        self.loop = None


async def _async_make(url: str) -> Any:
    return async_client(url)


def warm_up(side: Side, name: str) -> None:
    """Connect, load scripts, start background helpers, and wait once (see ``wait_once``): on
    a lock nobody else uses."""
    lock = side.lock(f"{name}:warm:{os.getpid()}", 10.0)
    for _ in range(3):
        side.once(lock)
    wait_once(side.lock(f"{name}:warm:{os.getpid()}", 10.0), lock, side.loop)


def server_probes(url: str) -> list[Any]:
    """A plain client for each server behind ``url``: the one server, or every node (masters
    and replicas) of a ``redis+cluster://`` cluster, whose CPU then counts in full."""
    import redis

    if not url.startswith(CLUSTER_SCHEME):
        return [redis.Redis.from_url(url)]
    cluster = sync_client(url)
    try:
        return [redis.Redis(host=node.host, port=node.port) for node in cluster.get_nodes()]
    finally:
        cluster.close()


def _server_cpu(probe: Any) -> float:
    info = probe.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


# Commands counted per acquisition in section 2 (INFO commandstats; commands a script runs
# count too): scripts, wake-up messages, queue joins (a refused attempt of a blocked waiter).
COUNTED = {"evalsha": "scripts", "publish": "PUBLISH", "spublish": "PUBLISH", "zadd": "ZADD"}


def _server_counters(probe: Any) -> tuple[float, dict[str, int]]:
    """The server's CPU seconds, and its calls of each command in :data:`COUNTED`."""
    stats = probe.info("commandstats")
    calls = {name: 0 for name in set(COUNTED.values())}
    for command, label in COUNTED.items():
        calls[label] += int(stats.get(f"cmdstat_{command}", {}).get("calls", 0))
    return _server_cpu(probe), calls


# -- child processes (the plumbing is in _common.py) ---------------------------------------


def contend_worker(
    lib: str,
    url: str,
    name: str,
    wid: int,
    events: Any,
    start_ns: Any,
    duration_ns: int,
    results: Any,
) -> None:
    """Loop acquire -> tiny critical section -> release from start_ns for duration_ns."""
    side = None
    try:
        side = Side(lib, url)
        lock = side.ready(name, 10.0, events, wid)
        end = wait_for_start(start_ns, duration_ns)
        if end is None:
            results.put((wid, None, "never started", 0.0))
            return
        cpu0 = cpu_s()
        if side.is_async:
            rec, cpu1 = side.run(_contend_async(lock, end))
        else:
            rec, cpu1 = _contend_sync(lock, end)
        results.put((wid, rec.tobytes(), None, cpu1 - cpu0))
    except BaseException as exc:
        text = error_text(exc)
        events.put(("error", text))
        results.put((wid, None, text + "\n" + traceback.format_exc(limit=4), 0.0))
    finally:
        if side is not None:
            side.close()


TAIL_NS = 500_000_000
"""After the window, each worker goes on (unrecorded) this long: the last calls it recorded
(made before the end, acquired after it) then wait under the same contention as every other
call, not while the other workers wind down and exit, which stretched the longest wait of
every library (at the end of the window, on 2 cores)."""


def _contend_sync(lock: Any, end: int) -> tuple[array, float]:
    """The loop: (t_call, t_acq, t_rel) of every hold whose call came before ``end``, and the
    worker's CPU seconds when the last of them was released."""
    rec = array("q")
    acquire, release = lock.acquire, lock.release
    cpu = None
    while (t_call := now_ns()) < end + TAIL_NS:
        ok = acquire()
        t_acq = now_ns()
        # the critical section: nothing but the two clock reads
        t_rel = now_ns()
        if not ok:
            continue  # cannot happen without a timeout; counted as no hold
        release()
        if t_call < end:
            rec.extend((t_call, t_acq, t_rel))
        elif cpu is None:
            cpu = cpu_s()
    return rec, cpu_s() if cpu is None else cpu


async def _contend_async(lock: Any, end: int) -> tuple[array, float]:
    """The same loop for an asyncio library, inside one task."""
    rec = array("q")
    cpu = None
    while (t_call := now_ns()) < end + TAIL_NS:
        ok = await lock.acquire()
        t_acq = now_ns()
        t_rel = now_ns()
        if not ok:
            continue
        await lock.release()
        if t_call < end:
            rec.extend((t_call, t_acq, t_rel))
        elif cpu is None:
            cpu = cpu_s()
    return rec, cpu_s() if cpu is None else cpu


def waiter_worker(
    lib: str, url: str, name: str, ttl: float, wid: int, events: Any, go: Any, results: Any
) -> None:
    """Block on the lock once (after ``go``), report when it was acquired, release, exit."""
    side = None
    try:
        side = Side(lib, url)
        lock = side.ready(name, ttl, events, wid)
        if not wait_flag(go, 120):
            results.put((wid, None, None, "never started"))
            return
        events.put(("calling", wid))
        t_call, t_acq, ok = side.once(lock)
        results.put((wid, t_call, t_acq if ok else None, None if ok else "acquire returned False"))
    except BaseException as exc:
        text = error_text(exc)
        events.put(("error", text))
        results.put((wid, None, None, text))
    finally:
        if side is not None:
            side.close()


def holder_worker(
    lib: str, url: str, name: str, ttl: float, events: Any, hold: Any, let_go: Any
) -> None:
    """Acquire when ``hold`` is set, report it, keep it until ``let_go`` (bounded), release."""
    side = None
    try:
        side = Side(lib, url)
        lock = side.ready(name, ttl, events, -2)
        if not wait_flag(hold, 120):
            return

        def held(t_call: int, t_acq: int, ok: bool) -> None:
            events.put(("held", (t_call, t_acq, ok)))

        side.once(lock, hold=let_go, hold_s=90.0, on_held=held)
        events.put(("released", now_ns()))
    except BaseException as exc:
        events.put(("error", error_text(exc)))
    finally:
        if side is not None:
            side.close()


class HeldLock:
    """A holder process and waiter processes on one lock, driven by three shared flags:
    ``hold`` (the holder acquires), ``go`` (the waiters call acquire), ``let_go`` (the holder
    releases)."""

    def __init__(
        self, ctx: Any, lib: str, url: str, name: str, ttl: float, waiter_ids: list[int]
    ) -> None:
        self.events, self.results = ctx.Queue(), ctx.Queue()
        self.go, self.hold, self.let_go = new_flag(ctx), new_flag(ctx), new_flag(ctx)
        self.holder = start_child(
            ctx, holder_worker, lib, url, name, ttl, self.events, self.hold, self.let_go
        )
        self.waiters = [
            start_child(
                ctx, waiter_worker, lib, url, name, ttl, w, self.events, self.go, self.results
            )
            for w in waiter_ids
        ]

    def take(self, ready_timeout: float) -> int:
        """Once every child is ready, let the holder acquire; when it had the lock (ns)."""
        wait_events(self.events, "ready", len(self.waiters) + 1, timeout=ready_timeout)
        self.hold.value = 1
        _t_call, t_held, ok = wait_events(self.events, "held", 1, timeout=20)[0]
        if not ok:
            raise RuntimeError("the holder could not acquire a free lock")
        return t_held

    def start_waiting(self) -> None:
        """Let the waiters call acquire; return once every one of them has called it."""
        self.go.value = 1
        wait_events(self.events, "calling", len(self.waiters), timeout=20)

    def stop(self) -> None:
        """Release every flag and reap every child (bounded)."""
        self.go.value = 1
        self.hold.value = 1
        self.let_go.value = 1
        reap([self.holder, *self.waiters], grace=5.0)


@dataclass
class Config:
    url: str
    quick: bool
    libs: list[str]
    iters: int
    warm: int
    rounds: int
    contend_sizes: tuple[int, ...]
    contend_seconds: float
    waiters: int
    wait_window: float
    wait_settle: float
    crash_ttl: float


# -- 1. uncontended ------------------------------------------------------------------------


def _floor_ops(cfg: Config, run_id: str, aclient: Any, closers: list) -> dict[str, Op]:
    """The raw floors, sync and asyncio: SET NX PX of a random token, EVALSHA compare-and-delete."""
    import redis

    base = redis.Redis.from_url(cfg.url)
    sha = base.script_load(CAD_SCRIPT)
    base.close()

    r = redis.Redis.from_url(cfg.url)
    closers.append(r.close)
    floor_key = f"bench:{run_id}:floor"

    def floor() -> None:
        token = secrets.token_hex(16)
        r.set(floor_key, token, nx=True, px=10000)
        r.evalsha(sha, 1, floor_key, token)

    afloor_key = f"bench:{run_id}:afloor"

    async def afloor() -> None:
        token = secrets.token_hex(16)
        await aclient.set(afloor_key, token, nx=True, px=10000)
        await aclient.evalsha(sha, 1, afloor_key, token)

    # The kept-connection floors: the same two commands on one connection taken from a pool
    # once (send, then read; no pool checkout per call).
    from redlease._compat import AsyncConnections, Connections

    kconn = Connections.get(r.connection_pool)
    closers.insert(0, lambda: r.connection_pool.release(kconn))
    kkey = f"bench:{run_id}:kept"

    def kept() -> None:
        token = secrets.token_hex(16)
        kconn.send_command("SET", kkey, token, "NX", "PX", 10000)
        kconn.read_response()
        kconn.send_command("EVALSHA", sha, 1, kkey, token)
        kconn.read_response()

    akconn: list[Any] = []
    akkey = f"bench:{run_id}:akept"

    async def akept() -> None:
        if not akconn:
            akconn.append(await AsyncConnections.get(aclient.connection_pool))
        conn = akconn[0]
        token = secrets.token_hex(16)
        await conn.send_command("SET", akkey, token, "NX", "PX", 10000)
        await conn.read_response()
        await conn.send_command("EVALSHA", sha, 1, akkey, token)
        await conn.read_response()

    return {
        "floor": (False, floor),
        "floor-async": (True, afloor),
        "kept": (False, kept),
        "kept-async": (True, akept),
    }


def _lock_ops(
    cfg: Config, run_id: str, aclient: Any, closers: list, errors: dict[str, str]
) -> dict[str, Op]:
    """One acquire+release per library (sync ones on a client each, asyncio ones on one), and
    the diagnostic redlease row without its watchdog."""
    import redis

    ops: dict[str, Op] = {}
    failure = "uncontended acquire returned False"
    for lib in cfg.libs:
        name = f"bench:{run_id}:solo:{lib}"
        try:
            if lib in ASYNC_LIBS:
                ops[lib] = acquire_release(make_async_lock(lib, aclient, name, 10.0), True, failure)
            else:
                client = redis.Redis.from_url(cfg.url)
                closers.append(client.close)
                ops[lib] = acquire_release(make_sync_lock(lib, client, name, 10.0), False, failure)
        except Exception as exc:
            errors[lib] = error_text(exc)
    if "redlease" in cfg.libs:
        # Diagnostic, not a default: the same lock without the watchdog (own client, so no
        # renewer thread exists in its runtime). The gap to the default row is the watchdog's.
        try:
            import redlease

            client = redis.Redis.from_url(cfg.url)
            closers.append(client.close)
            dlock = redlease.Lock(client, f"bench:{run_id}:solo:norenew", ttl=10.0, renew=False)
            ops[DIAG_NORENEW] = acquire_release(dlock, False, failure)
        except Exception as exc:
            errors[DIAG_NORENEW] = error_text(exc)
    return ops


def _add_floor_ratios(out: dict[str, Any]) -> None:
    """Every row's p50 over the sync floor's, and over the asyncio floor's."""
    floor_p50 = out.get("floor", {}).get("p50_us")
    afloor_p50 = out.get("floor-async", {}).get("p50_us")
    for row in out.values():
        if "error" in row:
            continue
        if floor_p50:
            row["ratio_floor"] = row["p50_us"] / floor_p50
        if afloor_p50:
            row["ratio_floor_async"] = row["p50_us"] / afloor_p50
        for kept in ("kept", "kept-async"):
            kept_p50 = out.get(kept, {}).get("p50_us")
            if kept_p50:
                row[f"ratio_{kept.replace('-', '_')}"] = row["p50_us"] / kept_p50


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Interleaved rounds so that the machine's noise hits every library alike."""
    loop = asyncio.new_event_loop()
    errors: dict[str, str] = {}
    closers: list[Callable[[], None]] = []
    try:
        aclient = loop.run_until_complete(_async_make(cfg.url))
        closers.append(lambda: loop.run_until_complete(aclient.aclose()))
        ops = {
            **_floor_ops(cfg, run_id, aclient, closers),
            **_lock_ops(cfg, run_id, aclient, closers, errors),
        }
        lat, wall = time_interleaved(loop, ops, errors, cfg.warm, cfg.iters, cfg.rounds)
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                close()
        close_loop(loop)
    out = latency_rows(lat, wall, errors)
    _add_floor_ratios(out)
    return out


# -- 2. contended --------------------------------------------------------------------------


def bench_contended(cfg: Config, ctx: Any, lib: str, nproc: int, run_id: str) -> dict[str, Any]:
    name = f"bench:{run_id}:contend:{lib}:{nproc}"
    probes = server_probes(cfg.url)
    try:
        window = run_contenders(
            ctx,
            contend_worker,
            (lib, cfg.url, name),
            nproc,
            cfg.contend_seconds,
            lambda: [_server_counters(probe) for probe in probes],
        )
    finally:
        for probe in probes:
            probe.close()
    holds = decode_holds(window.reports)
    per_proc = per_process_counts(holds, nproc, window.start, window.end)
    throughput = throughput_figures(per_proc, cfg.contend_seconds)
    client_cpu = sum(r[3] for r in window.reports)
    ends = list(zip(window.before, window.after, strict=True))
    server_cpu = sum(after[0] - before[0] for before, after in ends)
    calls = {
        label: sum(after[1][label] - before[1][label] for before, after in ends)
        for label in sorted(set(COUNTED.values()))
    }
    row: dict[str, Any] = {
        "processes": nproc,
        "seconds": cfg.contend_seconds,
        **throughput,
        **handoff_figures(holds),
        **wait_figures(holds),
        **spread_figures(per_proc),
        "per_process": per_proc,
        **cpu_figures(client_cpu, server_cpu, holds, throughput["acquisitions"]),
        **exclusion_figures(holds),
        **{
            f"{label}_per_acq": n / max(1, throughput["acquisitions"]) for label, n in calls.items()
        },
    }
    return add_errors(row, worker_errors(window.reports, nproc))


# -- 3. waiting load -----------------------------------------------------------------------


def _commands_processed(probe: Any) -> int:
    return int(probe.info("stats")["total_commands_processed"])


def bench_waiting(cfg: Config, ctx: Any, lib: str, run_id: str) -> dict[str, Any]:
    import redis

    name = f"bench:{run_id}:wait:{lib}"
    n = cfg.waiters
    held = HeldLock(ctx, lib, cfg.url, name, 10.0, list(range(n)))
    probe = redis.Redis.from_url(cfg.url)
    row: dict[str, Any] = {"waiters": n}
    try:
        t_held = held.take(ready_timeout=60 + 5 * n)
        held.start_waiting()
        time.sleep(cfg.wait_settle)
        c0 = _commands_processed(probe)
        w0 = now_ns()
        time.sleep(cfg.wait_window)
        c1 = _commands_processed(probe)
        w1 = now_ns()
        commands = c1 - c0 - 1  # minus our first INFO (the second is not counted in c1)
        seconds = (w1 - w0) / 1e9
        row.update(
            window_s=seconds,
            commands=commands,
            per_waiter_per_s=commands / n / seconds,
            window_end_after_hold_s=(w1 - t_held) / 1e9,
        )
        held.let_go.value = 1
        got = collect(held.results, n, timeout=30.0 + n * 1.0, procs=held.waiters)
        late = [e for _, _, _, e in got if e]
        if len(got) < n:
            late.append(f"{n - len(got)} waiter(s) never acquired after the release")
        if late:
            row["after_release_errors"] = late[:3]
    except Exception as exc:
        row["error"] = error_text(exc)
    finally:
        probe.close()
        held.stop()
    return row


# -- 4. crash recovery ---------------------------------------------------------------------


def _lease_end(probe: Any, key: str) -> int:
    """When the lease in ``key`` runs out, on the system-wide monotonic clock (ns)."""
    a = now_ns()
    pttl = int(probe.pttl(key))
    b = now_ns()
    if pttl < 0:
        raise RuntimeError(f"lease key {key!r} has PTTL {pttl} before the kill")
    return (a + b) // 2 + pttl * 1_000_000


def bench_crash(cfg: Config, ctx: Any, lib: str, run_id: str) -> dict[str, Any]:
    import redis

    ttl = cfg.crash_ttl
    name = f"bench:{run_id}:crash:{lib}"
    held = HeldLock(ctx, lib, cfg.url, name, ttl, [-1])
    probe = redis.Redis.from_url(cfg.url)
    row: dict[str, Any] = {"ttl_s": ttl}
    try:
        t_held = held.take(ready_timeout=60)
        # The waiter joins well into the lease (a "late joiner"): a lock whose waiters time their
        # retry from when they started waiting, not from the lease, shows it here.
        time.sleep(max(0.0, (t_held + int(JOIN_AT * ttl * 1e9) - now_ns()) / 1e9))
        held.start_waiting()
        time.sleep(0.3)  # the waiter is blocked (subscribed / polling) by now
        lease_end = _lease_end(probe, lease_key(lib, name))
        t_kill = now_ns()
        os.kill(held.holder.pid, signal.SIGKILL)
        held.holder.join(5)
        got = collect(held.results, 1, timeout=ttl * 4 + 15, procs=held.waiters)
        if not got:
            raise TimeoutError(f"the waiter did not acquire within {ttl * 4 + 15:g} s of the kill")
        _, t_call, t_acq, err = got[0]
        if err:
            raise RuntimeError(err)
        recovery = (t_acq - t_kill) / 1e9
        row.update(
            waiter_joined_after_hold_s=(t_call - t_held) / 1e9,
            kill_after_hold_s=(t_kill - t_held) / 1e9,
            lease_left_at_kill_s=(lease_end - t_kill) / 1e9,
            kill_to_acquire_s=recovery,
            ratio_ttl=recovery / ttl,
            lease_end_to_acquire_ms=(t_acq - lease_end) / 1e6,
        )
    except Exception as exc:
        row["error"] = error_text(exc)
    finally:
        probe.close()
        held.stop()
    return row


# -- report --------------------------------------------------------------------------------

MINE = ("redlease", "redlease-async")


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    """Print the tables; returns the list of failed targets (each ``_report_*`` prints one
    section and appends the targets it missed)."""
    failed: list[str] = []
    env = data["env"]
    print_header(
        f"redlease hand-off benchmark  |  server {env['server']}  |  redis-py {env['redis_py']}"
        f" ({'hiredis' if env['hiredis'] else 'python'} parser)  |  Python {env['python']}"
        f"  |  {env['cpus']} CPUs  |  load avg {env['load_before']} -> {env['load_after']}",
        cfg.quick,
    )
    if data["uncontended"]:
        _report_uncontended(cfg, data["uncontended"], failed)
    if data["contended"]:
        _report_contended(cfg, data, failed)
    if data["waiting"]:
        _report_waiting(cfg, data, failed)
    if data["crash"]:
        _report_crash(cfg, data, failed)
    print()
    if failed:
        print("Targets missed: " + "; ".join(failed))
    elif not any(lib.startswith("redlease") for lib in cfg.libs):
        print("No redlease target was measured (redlease not among --libs).")
    else:
        print("All targets met.")
    return failed


def _library_rows(
    cfg: Config,
    section: dict[str, Any],
    what: str,
    failed: list[str],
    measured: Callable[[str, dict[str, Any]], list[str]],
) -> list[list[str]]:
    """A table row per library of ``section``: ``measured(lib, row)``, or an ERROR row (and
    for redlease's, ``what`` not measured among the failed targets)."""
    rows = []
    for lib in cfg.libs:
        row = section.get(lib)
        if row is None:
            continue
        if "error" in row:
            rows.append(error_row(LIBS[lib], row))
            if lib in MINE:
                failed.append(f"{what} not measured ({lib} failed)")
            continue
        rows.append(measured(lib, row))
    return rows


def _report_uncontended(cfg: Config, u: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"1. Uncontended acquire+release: {cfg.iters} iterations each after {cfg.warm} warm-up,"
        f" interleaved in {cfg.rounds} rounds"
    )
    rows = []
    labels = {
        "floor": "raw floor: SET NX PX + EVALSHA del",
        "floor-async": "raw floor, redis.asyncio",
        "kept": "kept-connection floor (send+read)",
        "kept-async": "kept-connection floor, asyncio",
        **LIBS,
        DIAG_NORENEW: "  (diagnostic: redlease renew=False)",
    }
    keys = ["floor", "floor-async", "kept", "kept-async", *cfg.libs]
    if "redlease" in keys:
        keys.insert(keys.index("redlease") + 1, DIAG_NORENEW)
    for key in keys:
        row = u.get(key)
        if row is None:
            continue
        if "error" in row:
            rows.append(error_row(labels[key], row))
            if key in ("floor", "redlease"):
                failed.append(f"uncontended target not measured ({key} failed)")
            continue
        target = ""
        ratio_key = {"redlease": "ratio_floor", "redlease-async": "ratio_floor_async"}.get(key)
        if ratio_key is not None and ratio_key in row:
            ok = row[ratio_key] <= TARGET_UNCONTENDED
            target = f"<= {TARGET_UNCONTENDED:.2f}x  {verdict(ok)}"
            if not ok:
                failed.append(f"uncontended {key} p50 {row[ratio_key]:.2f}x its floor")
        extra = ""
        is_async = key in ASYNC_LIBS or key in ("floor-async", "kept-async")
        if is_async:
            extra = f"{row.get('ratio_floor_async', float('nan')):.2f}x"
        kept_ratio = row.get("ratio_kept_async" if is_async else "ratio_kept", float("nan"))
        rows.append(
            [
                labels[key],
                fmt(row["ops_per_s"], ",.0f"),
                fmt(row["p50_us"], ".0f"),
                fmt(row["p99_us"], ".0f"),
                f"{row['ratio_floor']:.2f}x",
                extra,
                f"{kept_ratio:.2f}x",
                target,
            ]
        )
    print_table(
        [
            "library",
            *("ops/s", "p50 us", "p99 us"),
            *("p50/floor", "p50/async floor", "p50/kept", "target"),
        ],
        rows,
        "lrrrrrrl",
    )


def _report_contended(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"2. Contended: N processes on one lock, loop acquire -> tiny section -> release for"
        f" {cfg.contend_seconds:g} s"
    )
    rows = []
    loud: list[str] = []
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            row = data["contended"].get(f"{lib}/{n}")
            if row is None:
                continue
            if "error" in row and not row.get("acquisitions"):
                rows.append(error_row(f"{LIBS[lib]}  N={n}", row))
                if lib in MINE:
                    failed.append(f"mutual exclusion not checked ({lib} N={n} failed)")
                continue
            rows.append(
                [
                    f"{LIBS[lib]}  N={n}",
                    fmt(row["acq_per_s"], ",.0f"),
                    fmt(row["handoff_p50_us"], ",.0f"),
                    fmt(row["handoff_p99_us"], ",.0f"),
                    f"{row['same_process_regrab'] * 100:.0f}%",
                    fmt(row["longest_wait_ms"], ",.1f"),
                    f"{row['per_process_min']}/{row['per_process_max']}",
                    fmt(row.get("client_cpu_us_per_acq"), ",.0f"),
                    fmt(row.get("server_cpu_us_per_acq"), ",.0f"),
                    "/".join(
                        fmt(row.get(f"{label}_per_acq"), ".2f")
                        for label in ("scripts", "PUBLISH", "ZADD")
                    ),
                    exclusion_verdict(row, f"{LIBS[lib]} N={n}", f"{lib} N={n}", loud, failed),
                ]
            )
    print_table(
        [
            "library",
            "acq/s",
            "hand-off p50 us",
            "p99 us",
            "same-proc",
            "longest wait ms",
            "per-proc min/max",
            "client CPU us/acq",
            "server CPU us/acq",
            "scripts/PUBLISH/ZADD per acq",
            "exclusion",
        ],
        rows,
        "lrrrrrrrrrl",
    )
    print_violations(loud)
    _print_against_peer(cfg, data["contended"])


def _print_against_peer(cfg: Config, contended: dict[str, Any]) -> None:
    """redlease against the fair peer, same run (informative; redis-py's acq/s is mostly one
    process re-grabbing its own lock, see same-proc)."""
    for n in cfg.contend_sizes:
        for mine in MINE:
            base = contended.get(f"{mine}/{n}", {})
            peer = contended.get(f"python-redis-lock/{n}", {})
            keys = ("acq_per_s", "handoff_p50_us", "longest_wait_ms", "client_cpu_us_per_acq")
            if all(base.get(k) and peer.get(k) for k in keys):
                print(
                    f"   N={n}: {LIBS[mine]} / python-redis-lock:"
                    f" acq/s {base['acq_per_s'] / peer['acq_per_s']:.2f}x,"
                    f" hand-off p50 {base['handoff_p50_us'] / peer['handoff_p50_us']:.2f}x,"
                    f" longest wait {base['longest_wait_ms'] / peer['longest_wait_ms']:.2f}x,"
                    " client CPU/acq"
                    f" {base['client_cpu_us_per_acq'] / peer['client_cpu_us_per_acq']:.2f}x"
                )
        floor = contended.get(f"fifo-floor/{n}", {})
        for lib in (*MINE, "python-redis-lock"):
            row = contended.get(f"{lib}/{n}", {})
            if row.get("longest_wait_ms") and floor.get("longest_wait_ms"):
                print(
                    f"   N={n}: {LIBS[lib]} / the FIFO floor:"
                    f" acq/s {row['acq_per_s'] / floor['acq_per_s']:.2f}x,"
                    f" hand-off p50 {row['handoff_p50_us'] / floor['handoff_p50_us']:.2f}x,"
                    f" longest wait {row['longest_wait_ms'] / floor['longest_wait_ms']:.2f}x"
                    f" (the floor's own: {floor['longest_wait_ms']:,.0f} ms)"
                )
        base = contended.get(f"redlease-barging/{n}", {})
        peer = contended.get(f"redis-py/{n}", {})
        if all(base.get(k) and peer.get(k) for k in ("acq_per_s", "longest_wait_ms")):
            print(
                f"   N={n}: {LIBS['redlease-barging']} / redis-py Lock:"
                f" acq/s {base['acq_per_s'] / peer['acq_per_s']:.2f}x (target >= 1),"
                f" longest wait {base['longest_wait_ms'] / peer['longest_wait_ms']:.2f}x"
                " (target <= 0.1)"
            )


def _report_waiting(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"3. Waiting load: one holder (10 s lease), {cfg.waiters} waiter processes blocked;"
        f" INFO total_commands_processed delta over ~{cfg.wait_window:g} s"
        " (Lua-internal calls count)"
    )
    rows = _library_rows(
        cfg,
        data["waiting"],
        "waiting-load target",
        failed,
        lambda lib, row: _waiting_row(lib, row, failed),
    )
    print_table(
        ["library", "waiters", "window s", "commands", "cmds/s/waiter", "target", "note"],
        rows,
        "lrrrrll",
    )


def _waiting_row(lib: str, row: dict[str, Any], failed: list[str]) -> list[str]:
    target = ""
    if lib in MINE:
        ok = row["per_waiter_per_s"] <= TARGET_WAIT_CMDS
        target = f"= 0  {verdict(ok)}"
        if not ok:
            failed.append(f"waiting load {lib} {row['per_waiter_per_s']:.2f}/s/waiter")
    note = ""
    if row.get("window_end_after_hold_s", 0) >= 10.0 / 3:
        note = "window reached the holder's first renewal (ttl/3): it may be counted; "
    if row.get("after_release_errors"):
        note += "after release: " + row["after_release_errors"][0]
    return [
        LIBS[lib],
        str(row["waiters"]),
        fmt(row["window_s"], ".2f"),
        str(row["commands"]),
        fmt(row["per_waiter_per_s"], ".2f"),
        target,
        note,
    ]


def _report_crash(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"4. Crash recovery: holder (ttl {cfg.crash_ttl:g} s) SIGKILLed while a process waits"
        f" (it started waiting {JOIN_AT * cfg.crash_ttl:g} s into the lease, the kill came"
        f" 0.3 s later); target kill->acquire <= ttl + {TARGET_RECOVERY_SLACK * 1000:.0f} ms"
    )
    rows = _library_rows(
        cfg,
        data["crash"],
        "crash-recovery target",
        failed,
        lambda lib, row: _crash_row(cfg, lib, row, failed),
    )
    print_table(
        [
            "library",
            "kill->acquire ms",
            "/ ttl",
            "lease left at kill ms",
            "lease end->acquire ms",
            "strict",
            "target",
        ],
        rows,
        "lrrrrrl",
    )
    print(
        "   strict = kill->acquire / (lease left at kill + "
        f"{TARGET_RECOVERY_SLACK * 1000:.0f} ms): <= 1 means the waiter got the lock within"
        f" {TARGET_RECOVERY_SLACK * 1000:.0f} ms of the lease really running out"
    )


def _crash_row(cfg: Config, lib: str, row: dict[str, Any], failed: list[str]) -> list[str]:
    limit = 1 + TARGET_RECOVERY_SLACK / cfg.crash_ttl
    # strict: against the lease actually left at the kill (a renewing library extended it)
    strict = row["kill_to_acquire_s"] / (row["lease_left_at_kill_s"] + TARGET_RECOVERY_SLACK)
    row["ratio_lease_left"] = strict
    target = ""
    if lib in MINE:
        ok = row["ratio_ttl"] <= limit and strict <= 1.0
        target = f"<= {limit:.3f} and strict <= 1  {verdict(ok)}"
        if not ok:
            failed.append(f"crash recovery {lib} {row['ratio_ttl']:.3f} x ttl, strict {strict:.3f}")
    return [
        LIBS[lib],
        fmt(row["kill_to_acquire_s"] * 1000, ",.0f"),
        fmt(row["ratio_ttl"], ".3f"),
        fmt(row["lease_left_at_kill_s"] * 1000, ",.0f"),
        fmt(row["lease_end_to_acquire_ms"], ",.1f"),
        fmt(strict, ".3f"),
        target,
    ]


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", help="use this server instead of starting one (redis://host:port)")
    p.add_argument("--quick", action="store_true", help="short smoke run (small samples)")
    p.add_argument("--json", metavar="FILE", help="write the raw figures to FILE")
    p.add_argument(
        "--libs",
        default=",".join(LIBS),
        help=f"comma-separated subset of: {', '.join(LIBS)}",
    )
    p.add_argument(
        "--sizes",
        default=None,
        help="comma-separated numbers of processes for section 2 (default: 4,16)",
    )
    p.add_argument(
        "--sections",
        default="1,2,3,4",
        help="comma-separated subset of the sections 1,2,3,4 to run",
    )
    return p.parse_args(argv)


def _environment(cfg: Config) -> dict[str, Any]:
    import redis

    probe = redis.Redis.from_url(cfg.url)
    info = probe.info("server")
    probe.close()
    return {
        "server": server_name(info),
        "redis_py": redis.__version__,
        "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "load_before": load_average(),
        "url": cfg.url,
        "quick": cfg.quick,
    }


def _run_sections(
    cfg: Config, sections: set[str], run_id: str, data: dict[str, Any], progress: Progress
) -> None:
    ctx = mp.get_context("spawn")
    if "1" in sections:
        progress.uncontended(data, lambda: bench_uncontended(cfg, run_id), "floor")
    if "2" in sections:
        progress.per_size(
            data["contended"],
            cfg.contend_sizes,
            cfg.libs,
            lambda lib, n: bench_contended(cfg, ctx, lib, n, run_id),
        )
    if "3" in sections:
        progress.per_library(
            data["waiting"], cfg.libs, lambda lib: bench_waiting(cfg, ctx, lib, run_id)
        )
    if "4" in sections:
        progress.per_library(
            data["crash"], cfg.libs, lambda lib: bench_crash(cfg, ctx, lib, run_id)
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = {s.strip() for s in args.sections.split(",")}
    interrupt_on_sigterm()
    server = None
    url = args.url
    if url is None:
        from redlease.server import RedisServer

        server = RedisServer().start()
        url = server.url
    if args.quick:
        cfg = Config(url, True, libs, 600, 100, 4, (4, 16), 1.0, 4, 1.5, 0.4, 2.0)
    else:
        cfg = Config(url, False, libs, 3000, 300, 10, (4, 16), 3.0, 8, 2.5, 0.5, 3.0)

    if args.sizes:
        cfg.contend_sizes = tuple(int(n) for n in args.sizes.split(","))
    run_id = secrets.token_hex(4)
    data: dict[str, Any] = {
        "env": _environment(cfg),
        "uncontended": {},
        "contended": {},
        "waiting": {},
        "crash": {},
    }
    progress = Progress()
    try:
        _run_sections(cfg, sections, run_id, data, progress)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        reap_all()
        if server is not None:
            server.stop()
        else:
            delete_run_keys(url, run_id)
        data["env"]["load_after"] = load_average()
        data["env"]["elapsed_s"] = progress.elapsed()
    progress("done")
    failed = report(cfg, data)
    data["failed_targets"] = failed
    if args.json:
        write_json(args.json, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
