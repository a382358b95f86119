#!/usr/bin/env python
"""Redlock benchmark: redlease's Redlock against pottery and aioredlock, 1 and 5 servers, one run.

    .venv/bin/python benchmarks/redlock.py              # full run (about 2-3 minutes)
    .venv/bin/python benchmarks/redlock.py --quick      # smoke run (under a minute)
    .venv/bin/python benchmarks/redlock.py --urls redis://h:1,redis://h:2,... --json out.json

Five servers are started here (``redlease.server.RedisServer``, default settings) unless
``--urls`` gives five. Three measurements, each library with its defaults and a 10 s lease:

1. uncontended acquire+release latency over 1 and over 5 servers, interleaved with raw
   fan-out floors (``SET NX PX`` then a compare-and-delete ``EVALSHA`` on every server);
   the figure of merit is how much the 5-server p50 costs over the 1-server p50;
2. 16 worker processes on one lock over 5 servers: throughput, per-process spread
   (starvation), longest wait, failed attempts, and a mutual-exclusion check;
3. 2 of the 5 servers paused (SIGSTOP): does each library still acquire, and how fast.

Targets are judged with ratios of figures measured in this same run. See benchmarks/README.md.
The process plumbing (start flags, reaping, bounded waits), the interleaved latency loop, the
figures of a contended run and the table printer are shared with ``handoff.py``: they live in
``_common.py`` next to this file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import inspect
import logging
import multiprocessing as mp
import os
import platform
import queue
import secrets
import sys
import time
import traceback
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from _common import (
    CAD_SCRIPT,
    Op,
    Progress,
    acquire_release,
    add_errors,
    close_loop,
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
    pct,
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
    "redlease": "redlease Redlock",
    "redlease-async": "redlease.asyncio Redlock",
    "pottery": "pottery Redlock",
    "aioredlock": "aioredlock Aioredlock",
}
ASYNC_LIBS = {"redlease-async", "aioredlock"}
MINE = ("redlease", "redlease-async")
FLOORS: dict[str, str] = {
    "floor": "do-nothing Redlock: SET NX PX + EVALSHA del, kept conns, write all then read",
    "nothing-async": "do-nothing Redlock, asyncio: the same on kept asyncio connections",
    "floor-async": "raw floor, redis.asyncio + gather (client pools)",
    "scripts": "redlease's acquire + release scripts, do-nothing fan-out (sync)",
}
NOTHING = {False: "floor", True: "nothing-async"}
"""The do-nothing Redlock of each kind (sync, asyncio): the floor a Redlock is judged by."""
TTL = 10.0  # the common lease, seconds
SIZES = (1, 5)  # servers per lock in section 1

# Targets (ratios of figures from the same run).
TARGET_VS_POTTERY = 5.0  # redlease contended acquisitions/s / pottery's
TARGET_VS_NOTHING = 1.1  # redlease p50 over 5 servers / the do-nothing Redlock's, same kind


def _small_quorum(cls: Any) -> dict[str, bool]:
    """``allow_small_quorum=True`` where the Redlock takes it (the 1-server row; earlier
    versions of redlease, measured by before_after.py, accepted 1 server without it)."""
    return (
        {"allow_small_quorum": True}
        if "allow_small_quorum" in inspect.signature(cls).parameters
        else {}
    )


class Backend:
    """One library's clients for a list of servers, in one process.

    ``lock(name)`` gives a handle with ``acquire() -> bool`` and ``release()`` (coroutines for
    asyncio libraries). ``acquire()`` is each library's default call: blocking without a
    timeout for redlease and pottery (pottery retries forever after a random 0-0.2 s sleep),
    three tries then ``LockError`` for aioredlock, reported here as ``False``.
    asyncio backends are built with ``await Backend.open_async(...)`` inside their loop.
    """

    def __init__(self, lib: str, urls: Sequence[str]) -> None:
        self.lib = lib
        self.urls = list(urls)
        self.is_async = lib in ASYNC_LIBS
        self.clients: list[Any] = []
        self.manager: Any = None
        if not self.is_async:
            import redis

            self.clients = [redis.Redis.from_url(u) for u in self.urls]

    @classmethod
    async def open_async(cls, lib: str, urls: Sequence[str]) -> Backend:
        self = cls(lib, urls)
        if lib == "redlease-async":
            import redis.asyncio

            self.clients = [redis.asyncio.Redis.from_url(u) for u in self.urls]
        elif lib == "aioredlock":
            from aioredlock import Aioredlock

            self.manager = Aioredlock(list(self.urls))  # URL strings: aioredis pools
        return self

    def lock(self, name: str) -> Any:
        """A lock of this library on ``self.clients`` (1 or 5 servers)."""
        if self.lib == "redlease":
            import redlease

            return redlease.Redlock(self.clients, name, ttl=TTL, **_small_quorum(redlease.Redlock))
        if self.lib == "redlease-async":
            import redlease.asyncio

            cls = redlease.asyncio.Redlock
            return cls(self.clients, name, ttl=TTL, **_small_quorum(cls))
        if self.lib == "pottery":
            import pottery

            return pottery.Redlock(key=name, masters=set(self.clients), auto_release_time=TTL)
        if self.lib == "aioredlock":
            return _AioHandle(self.manager, name)
        raise ValueError(f"unknown library {self.lib!r}")

    def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()

    async def aclose(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), 5)
        if self.manager is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.manager.destroy(), 5)


class _AioHandle:
    """aioredlock's lock call as acquire/release; LockError (it gave up) -> False."""

    def __init__(self, manager: Any, name: str) -> None:
        self.manager, self.name, self.held = manager, name, None

    async def acquire(self) -> bool:
        from aioredlock import LockError

        try:
            self.held = await self.manager.lock(self.name, lock_timeout=int(TTL))
        except LockError:
            return False
        return True

    async def release(self) -> None:
        held, self.held = self.held, None
        await self.manager.unlock(held)


class Proc:
    """A backend in a child process, with a private event loop for asyncio libraries."""

    def __init__(self, lib: str, urls: Sequence[str]) -> None:
        self.is_async = lib in ASYNC_LIBS
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self.loop = asyncio.new_event_loop()
            self.backend = self.loop.run_until_complete(Backend.open_async(lib, urls))
        else:
            self.backend = Backend(lib, urls)

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def once(self, lock: Any) -> bool:
        if not self.is_async:
            ok = bool(lock.acquire())
            if ok:
                lock.release()
            return ok

        async def go() -> bool:
            ok = bool(await lock.acquire())
            if ok:
                await lock.release()
            return ok

        return self.run(go())

    def warm_up(self, name: str) -> list[str]:
        """Connect, load scripts, start helpers, and wait once (``wait_once``): on a lock
        nobody else uses.

        Three acquire+release pairs must succeed within ten tries; the errors of the failed
        tries are returned (first calls can time out while 16 processes start on 2 CPUs).
        """
        lock = self.backend.lock(f"{name}:warm:{os.getpid()}")
        errors: list[str] = []
        done = 0
        for _ in range(10):
            try:
                if self.once(lock):
                    done += 1
                else:
                    errors.append("acquire of a free lock failed")
            except Exception as exc:
                errors.append(error_text(exc))
                time.sleep(0.05)
            if done == 3:
                other = self.backend.lock(f"{name}:warm:{os.getpid()}")
                if not wait_once(other, lock, self.loop):
                    errors.append("the waiting warm-up did not get the lock")
                return errors
        raise RuntimeError(f"warm-up failed {len(errors)} times; first: {errors[0]}")

    def close(self) -> None:
        if self.loop is None:
            self.backend.close()
            return
        # aioredlock logs every unlock its background clean-up cannot finish once the
        # pools are closed: expected at teardown, and noise on the terminal.
        logging.getLogger("aioredlock").setLevel(logging.CRITICAL)
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.backend.aclose())
        close_loop(self.loop)
        self.loop = None


@dataclass
class Config:
    urls: list[str]
    quick: bool
    libs: list[str]
    iters: int
    warm: int
    rounds: int
    workers: int
    contend_servers: tuple[int, ...]
    contend_seconds: float
    pause_iters: int
    pause_budget: float
    why: bool = False  # count rounds and their causes inside redlease's workers (Trace)


# -- 1. uncontended ------------------------------------------------------------------------


def _floor_ops(
    cfg: Config, run_id: str, loop: asyncio.AbstractEventLoop, closers: list, aclosers: list
) -> dict[str, Op]:
    """The raw fan-out floors over 1 and 5 servers: SET NX PX on every server (write all,
    then read all), then EVALSHA compare-and-delete the same way; and the same with
    redis.asyncio and gather."""
    import redis

    sha = ""
    for url in cfg.urls[: max(SIZES)]:
        probe = redis.Redis.from_url(url)
        sha = probe.script_load(CAD_SCRIPT)
        probe.close()

    ops: dict[str, Op] = {}
    for n in SIZES:
        clients = [redis.Redis.from_url(u) for u in cfg.urls[:n]]
        closers.extend(c.close for c in clients)
        conns = [c.connection_pool.get_connection() for c in clients]
        key = f"bench:{run_id}:floor:{n}"

        def floor(conns: list[Any] = conns, key: str = key) -> None:
            token = secrets.token_hex(16)
            for conn in conns:
                conn.send_command("SET", key, token, "NX", "PX", int(TTL * 1000))
            for conn in conns:
                conn.read_response()
            for conn in conns:
                conn.send_command("EVALSHA", sha, 1, key, token)
            for conn in conns:
                conn.read_response()

        ops[f"floor/{n}"] = (False, floor)

        aclients = loop.run_until_complete(_async_clients(cfg.urls[:n]))
        aclosers.extend(c.aclose for c in aclients)
        akey = f"bench:{run_id}:afloor:{n}"

        async def afloor(aclients: list[Any] = aclients, akey: str = akey) -> None:
            token = secrets.token_hex(16)
            await asyncio.gather(
                *(c.set(akey, token, nx=True, px=int(TTL * 1000)) for c in aclients)
            )
            await asyncio.gather(*(c.evalsha(sha, 1, akey, token) for c in aclients))

        ops[f"floor-async/{n}"] = (True, afloor)

        aconns = loop.run_until_complete(_async_conns(aclients))
        nkey = f"bench:{run_id}:nothing:{n}"

        async def nothing(aconns: list[Any] = aconns, nkey: str = nkey) -> None:
            token = secrets.token_hex(16)
            for conn in aconns:
                await conn.send_command("SET", nkey, token, "NX", "PX", int(TTL * 1000))
            for conn in aconns:
                await conn.read_response()
            for conn in aconns:
                await conn.send_command("EVALSHA", sha, 1, nkey, token)
            for conn in aconns:
                await conn.read_response()

        ops[f"nothing-async/{n}"] = (True, nothing)
        ops[f"scripts/{n}"] = (False, _scripts_op(clients, run_id, n))
    return ops


async def _async_conns(aclients: list[Any]) -> list[Any]:
    """One connection per asyncio client, checked out once and kept."""
    return [await c.connection_pool.get_connection() for c in aclients]


def _scripts_op(clients: list[Any], run_id: str, n: int) -> Callable[[], None]:
    """redlease's own Redlock acquire and release scripts (reservation mode, as Redlock
    sends them) on one kept connection per server, write all then read: what the lock's
    server-side work costs, with no client logic around it."""
    from redlease._core.lock import ACQUIRE_RESERVING, RELEASE, LockKeys
    from redlease._core.waiters import WAITERS

    for c in clients:
        c.script_load(ACQUIRE_RESERVING.source)
        c.script_load(RELEASE.source)
    conns = [c.connection_pool.get_connection() for c in clients]
    keys = LockKeys.build("bench", f"{run_id}:scripts:{n}".encode())
    lock_keys = keys.in_order()
    ttl_ms = int(TTL * 1000)

    def scripts() -> None:
        token = secrets.token_hex(16).encode()
        acquire = (token, ttl_ms, 0, 50, WAITERS, "", "1")  # score: the server's time; tell
        for conn in conns:
            conn.send_command("EVALSHA", ACQUIRE_RESERVING.sha, 4, *lock_keys, *acquire)
        for conn in conns:
            conn.read_response()
        for i, conn in enumerate(conns):
            tell = "1" if i < n - (n // 2 + 1) + 1 else "0"
            conn.send_command(
                "EVALSHA", RELEASE.sha, 4, *lock_keys, token, 50, WAITERS, "R", 0, tell
            )
        for conn in conns:
            conn.read_response()

    return scripts


def _lock_ops(
    cfg: Config,
    run_id: str,
    loop: asyncio.AbstractEventLoop,
    closers: list,
    aclosers: list,
    errors: dict[str, str],
) -> dict[str, Op]:
    """One acquire+release per library over 1 and over 5 servers, a backend each."""
    ops: dict[str, Op] = {}
    failure = "uncontended acquire failed"
    for lib in cfg.libs:
        for n in SIZES:
            key = f"{lib}/{n}"
            name = f"bench:{run_id}:solo:{lib}:{n}"
            try:
                if lib in ASYNC_LIBS:
                    backend = loop.run_until_complete(Backend.open_async(lib, cfg.urls[:n]))
                    aclosers.append(backend.aclose)
                    ops[key] = acquire_release(backend.lock(name), True, failure)
                else:
                    backend = Backend(lib, cfg.urls[:n])
                    closers.append(backend.close)
                    ops[key] = acquire_release(backend.lock(name), False, failure)
            except Exception as exc:
                errors[key] = error_text(exc)
    return ops


def _add_ratios(cfg: Config, out: dict[str, Any]) -> None:
    """scaling: p50 over 5 servers / p50 over 1; ratio_floor: p50 / the floor's of the same
    kind and N; scaling_over_floor: the scaling / the floor's scaling."""
    lo, hi = min(SIZES), max(SIZES)
    for base in [*FLOORS, *cfg.libs]:
        a, b = out.get(f"{base}/{lo}", {}), out.get(f"{base}/{hi}", {})
        if a.get("p50_us") and b.get("p50_us"):
            b["scaling"] = b["p50_us"] / a["p50_us"]
    for n in SIZES:  # the scripts row against the sync do-nothing Redlock
        row, floor_row = out.get(f"scripts/{n}", {}), out.get(f"floor/{n}", {})
        if row.get("p50_us") and floor_row.get("p50_us"):
            row["ratio_nothing"] = row["p50_us"] / floor_row["p50_us"]
    for lib in cfg.libs:
        floor_kind = "floor-async" if lib in ASYNC_LIBS else "floor"
        nothing_kind = NOTHING[lib in ASYNC_LIBS]
        for n in SIZES:
            row, floor_row = out.get(f"{lib}/{n}", {}), out.get(f"{floor_kind}/{n}", {})
            if row.get("p50_us") and floor_row.get("p50_us"):
                row["ratio_floor"] = row["p50_us"] / floor_row["p50_us"]
            nothing_row = out.get(f"{nothing_kind}/{n}", {})
            if row.get("p50_us") and nothing_row.get("p50_us"):
                row["ratio_nothing"] = row["p50_us"] / nothing_row["p50_us"]
        row, floor_row = out.get(f"{lib}/{hi}", {}), out.get(f"{floor_kind}/{hi}", {})
        if row.get("scaling") and floor_row.get("scaling"):
            row["scaling_over_floor"] = row["scaling"] / floor_row["scaling"]


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Every (library, N) row and the floors, interleaved so that load bursts hit all alike."""
    loop = asyncio.new_event_loop()
    errors: dict[str, str] = {}
    closers: list[Callable[[], None]] = []
    aclosers: list[Callable[[], Any]] = []
    try:
        ops = {
            **_floor_ops(cfg, run_id, loop, closers, aclosers),
            **_lock_ops(cfg, run_id, loop, closers, aclosers, errors),
        }
        lat, wall = time_interleaved(
            loop, ops, errors, cfg.warm, cfg.iters, cfg.rounds, async_timeout=30
        )
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                close()
        for aclose in aclosers:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(aclose(), 5))
        close_loop(loop)
    out = latency_rows(lat, wall, errors)
    _add_ratios(cfg, out)
    return out


async def _async_clients(urls: Sequence[str]) -> list[Any]:
    import redis.asyncio

    return [redis.asyncio.Redis.from_url(u) for u in urls]


# -- 2b. why each round ran (``--why``) ----------------------------------------------------


class Trace:
    """Counters inside one redlease worker (``--why``): per acquisition, the attempt rounds by
    outcome (won, refused, split) and by what started each (the first try, a wake-up message,
    a timer), and the wake-up messages this process read, by kind (see ``_core/waiters.py``).

    It wraps the Redlock's ``_acquire``/``_try`` and the waiter table's methods in this
    process only; a few dict updates per round, so it is off unless asked for.
    """

    def __init__(self) -> None:
        self.counts: dict[str, int] = {}
        self.why: str | None = None

    def add(self, key: str) -> None:
        self.counts[key] = self.counts.get(key, 0) + 1

    def install(self, lib: str) -> None:
        import redlease
        import redlease.asyncio
        from redlease._core.waiters import Action, WaiterTable

        trace = self
        on_message, due, plan = WaiterTable.on_message, WaiterTable.due, WaiterTable.plan
        refused, disconnect = WaiterTable.refused, WaiterTable.on_disconnect

        def traced_message(table: Any, data: bytes, now: float) -> list[Any]:
            kind = data[:1].decode("ascii", "replace")
            trace.add(f"message {kind}")
            woken = on_message(table, data, now)
            for waiter in woken:
                waiter.why = kind
            if kind == "N":
                for waiter in table.waiters():
                    if waiter.token == data[1:].partition(b" ")[0]:
                        waiter.check_why = "N window"
            return woken

        def traced_due(table: Any, now: float) -> list[Any]:
            woken = due(table, now)
            for waiter in woken:
                waiter.why = getattr(waiter, "check_why", "?") + " lapsed (hub)"
            return woken

        def traced_disconnect(table: Any) -> list[Any]:
            woken = disconnect(table)
            for waiter in woken:
                waiter.why = "disconnect"
            return woken

        def traced_refused(waiter: Any, held: bool, ms: int, now: float) -> None:
            if not held:
                waiter.check_why = "reservation"
            refused(waiter, held, ms, now)

        def traced_plan(waiter: Any, deadline: Any, now: float, fallback: float) -> Any:
            woken, check = waiter.woken, waiter.check_at
            step = plan(waiter, deadline, now, fallback)
            if step[0] is Action.ATTEMPT and trace.why is None:
                if woken:
                    trace.why = "woken: " + str(getattr(waiter, "why", "?"))
                elif check is not None and check <= now:
                    trace.why = "timer: " + getattr(waiter, "check_why", "?") + " lapsed"
                else:
                    trace.why = "timer: lease end"
            return step

        WaiterTable.on_message = traced_message  # type: ignore[method-assign]
        WaiterTable.due = traced_due  # type: ignore[method-assign]
        WaiterTable.on_disconnect = traced_disconnect  # type: ignore[method-assign]
        WaiterTable.refused = staticmethod(traced_refused)  # type: ignore[method-assign]
        WaiterTable.plan = staticmethod(traced_plan)  # type: ignore[method-assign]

        cls: Any = redlease.asyncio.Redlock if lib == "redlease-async" else redlease.Redlock
        acquire, attempt = cls._acquire, cls._try

        def outcome(join: bool, found: Any) -> None:
            holding, tally = found
            kind = "won" if holding is not None else "split" if tally.granted else "refused"
            why = trace.why or ("first try" if trace.counts.get("_fresh") else "no sleep")
            trace.counts["_fresh"] = 0
            trace.why = None
            trace.add(f"round {kind} <- {why}")
            trace.add(f"rounds {kind}")

        if inspect.iscoroutinefunction(acquire):

            async def traced_acquire(lock: Any, *args: Any) -> Any:
                trace.counts["_fresh"], trace.why = 1, None
                holding = await acquire(lock, *args)
                trace.add("acquisitions" if holding is not None else "gave up")
                return holding

            async def traced_try(lock: Any, *args: Any, join: bool, ticket: str) -> Any:
                found = await attempt(lock, *args, join=join, ticket=ticket)
                outcome(join, found)
                return found

        else:

            def traced_acquire(lock: Any, *args: Any) -> Any:  # type: ignore[misc]
                trace.counts["_fresh"], trace.why = 1, None
                holding = acquire(lock, *args)
                trace.add("acquisitions" if holding is not None else "gave up")
                return holding

            def traced_try(lock: Any, *args: Any, join: bool, ticket: str) -> Any:  # type: ignore[misc]
                found = attempt(lock, *args, join=join, ticket=ticket)
                outcome(join, found)
                return found

        cls._acquire, cls._try = traced_acquire, traced_try
        self._count_scripts(lib, cls)

    def _count_scripts(self, lib: str, cls: Any) -> None:
        """Scripts sent by this process, by name: in rounds, and behind late calls."""
        import redlease._fanout as fanout

        trace = self
        fan: Any = fanout.AsyncFanOut if lib == "redlease-async" else fanout.FanOut
        run, follow = fan.run, fan.follow

        def counted(calls: Any) -> None:
            for call in calls:
                trace.add(f"script {call[1].name}")

        if lib == "redlease-async":

            async def traced_run(calls: Any, *args: Any, **kwargs: Any) -> Any:
                counted(calls)
                return await run(calls, *args, **kwargs)

            async def traced_follow(late: Any, script: Any, *args: Any) -> Any:
                sent = await follow(late, script, *args)
                if sent:
                    trace.add(f"script {script.name} (behind a late one)")
                return sent

        else:

            def traced_run(calls: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]
                counted(calls)
                return run(calls, *args, **kwargs)

            def traced_follow(late: Any, script: Any, *args: Any) -> Any:  # type: ignore[misc]
                sent = follow(late, script, *args)
                if sent:
                    trace.add(f"script {script.name} (behind a late one)")
                return sent

        fan.run, fan.follow = staticmethod(traced_run), staticmethod(traced_follow)

    def reset(self) -> None:
        """Forget the warm-up's counts."""
        self.counts = {}


def why_figures(traces: list[dict[str, int]]) -> dict[str, float]:
    """The workers' counts summed, per acquisition."""
    total: dict[str, int] = {}
    for counts in traces:
        for key, value in counts.items():
            if not key.startswith("_"):
                total[key] = total.get(key, 0) + value
    acquisitions = max(1, total.get("acquisitions", 0))
    out = {key: value / acquisitions for key, value in sorted(total.items())}
    out["acquisitions"] = total.get("acquisitions", 0)
    return out


# -- 2. contended --------------------------------------------------------------------------


def contend_worker(
    lib: str,
    urls: list[str],
    name: str,
    why: bool,
    wid: int,
    events: Any,
    start_ns: Any,
    duration_ns: int,
    results: Any,
) -> None:
    """Loop acquire -> tiny critical section -> release from start_ns for duration_ns.

    Records (t_want, t_acq, t_rel) per hold: t_want is the first attempt since this process's
    previous release (failed attempts in between are retried, and counted).
    """
    proc = None
    trace = Trace() if why and lib in MINE else None
    try:
        if trace is not None:
            trace.install(lib)
        proc = Proc(lib, urls)
        warm_errors = proc.warm_up(name)
        lock = proc.backend.lock(name)
        if trace is not None:
            trace.reset()
        events.put(("ready", wid))
        end = wait_for_start(start_ns, duration_ns)
        if end is None:
            results.put((wid, None, "never started", 0.0, 0, 0, "", warm_errors))
            return
        cpu0 = cpu_s()
        if proc.is_async:
            rec, failed, errors, first = proc.run(_contend_async(lock, end))
        else:
            rec, failed, errors, first = _contend_sync(lock, end)
        cpu = cpu_s() - cpu0
        counts = {} if trace is None else trace.counts
        results.put((wid, rec.tobytes(), None, cpu, failed, errors, first, warm_errors, counts))
    except BaseException as exc:
        text = error_text(exc)
        events.put(("error", text))
        detail = text + "\n" + traceback.format_exc(limit=4)
        results.put((wid, None, detail, 0.0, 0, 0, "", []))
    finally:
        if proc is not None:
            proc.close()


def _contend_sync(lock: Any, end: int) -> tuple[array, int, int, str]:
    """The loop until ``end``: the holds, failed attempts, calls that raised, the first error."""
    rec, failed, errors, first = array("q"), 0, 0, ""
    acquire, release = lock.acquire, lock.release
    t_want = 0
    while now_ns() < end:
        t_call = now_ns()
        t_want = t_want or t_call
        try:
            ok = acquire()
        except Exception as exc:
            errors += 1
            first = first or error_text(exc)
            time.sleep(0.001)
            continue
        t_acq = now_ns()
        # the critical section: nothing but the two clock reads
        t_rel = now_ns()
        if not ok:
            failed += 1
            continue
        try:
            release()
        except Exception as exc:
            errors += 1
            first = first or error_text(exc)
        rec.extend((t_want, t_acq, t_rel))
        t_want = 0
    return rec, failed, errors, first


async def _contend_async(lock: Any, end: int) -> tuple[array, int, int, str]:
    """The same loop for an asyncio library, inside one task."""
    rec, failed, errors, first = array("q"), 0, 0, ""
    t_want = 0
    while now_ns() < end:
        t_call = now_ns()
        t_want = t_want or t_call
        try:
            ok = await lock.acquire()
        except Exception as exc:
            errors += 1
            first = first or error_text(exc)
            await asyncio.sleep(0.001)
            continue
        t_acq = now_ns()
        t_rel = now_ns()
        if not ok:
            failed += 1
            continue
        try:
            await lock.release()
        except Exception as exc:
            errors += 1
            first = first or error_text(exc)
        rec.extend((t_want, t_acq, t_rel))
        t_want = 0
    return rec, failed, errors, first


def _server_counters(probes: list[Any]) -> tuple[float, int, int, int]:
    """Summed over the servers: CPU seconds, script calls (EVALSHA + EVAL), all commands, and
    wake-up messages (PUBLISH, also from scripts: redlease's H, N and T).

    Redis 7 counts the commands a script runs in both commandstats and the total.
    """
    cpu, scripts, commands, messages = 0.0, 0, 0, 0
    for probe in probes:
        info = probe.info("cpu")
        cpu += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        stats = probe.info("commandstats")
        scripts += sum(
            int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval")
        )
        messages += int(stats.get("cmdstat_publish", {}).get("calls", 0))
        commands += int(probe.info("stats")["total_commands_processed"])
    return cpu, scripts, commands, messages


def _failure_figures(reports: list[Any], seconds: float) -> dict[str, Any]:
    """Acquire calls that returned False, calls that raised, and warm-up calls that failed."""
    failed = sum(r[4] for r in reports)
    first_errors = [r[6] for r in reports if r[6]]
    warm_errors = [e for r in reports for e in r[7]]
    return {
        "failed_attempts": failed,
        "failed_per_s": failed / seconds,
        "call_errors": sum(r[5] for r in reports),
        "call_error_example": first_errors[:1],
        "warm_up_errors": len(warm_errors),
        "warm_up_error_example": warm_errors[:1],
    }


def _held_share(holds: list[Any], start: int, end: int) -> float:
    """The share of the window during which someone held the lock."""
    busy = sum(
        min(t_rel, end) - max(t_acq, start)
        for t_acq, t_rel, _, _ in holds
        if t_acq < end and t_rel > start
    )
    return busy / max(1, end - start)


def bench_contended(cfg: Config, ctx: Any, lib: str, nserv: int, run_id: str) -> dict[str, Any]:
    import redis

    nproc = cfg.workers
    urls = cfg.urls[:nserv]
    name = f"bench:{run_id}:contend:{lib}:{nserv}"
    probes = [redis.Redis.from_url(u, socket_timeout=5) for u in urls]
    try:
        window = run_contenders(
            ctx,
            contend_worker,
            (lib, urls, name, cfg.why),
            nproc,
            cfg.contend_seconds,
            lambda: _server_counters(probes),
        )
    finally:
        for probe in probes:
            probe.close()
    seconds = cfg.contend_seconds
    server_cpu, scripts, commands, messages = (
        b - a for a, b in zip(window.before, window.after, strict=True)
    )
    holds = decode_holds(window.reports)
    per_proc = per_process_counts(holds, nproc, window.start, window.end)
    throughput = throughput_figures(per_proc, seconds)
    in_window = throughput["acquisitions"]
    client_cpu = sum(r[3] for r in window.reports)
    row: dict[str, Any] = {
        "processes": nproc,
        "servers": nserv,
        "seconds": seconds,
        **throughput,
        **_failure_figures(window.reports, seconds),
        **handoff_figures(holds),
        **wait_figures(holds),
        **spread_figures(per_proc),
        "starved": sum(1 for v in per_proc.values() if v == 0),
        "per_process": per_proc,
        "held_share": _held_share(holds, window.start, window.end),
        **cpu_figures(client_cpu, server_cpu, holds, in_window),
        "cpu_s_per_s": (client_cpu + server_cpu) / seconds,
        "scripts_per_acq": scripts / max(1, in_window) if scripts >= 0 else None,
        "commands_per_acq": commands / max(1, in_window) if commands >= 0 else None,
        "messages_per_acq": messages / max(1, in_window) if messages >= 0 else None,
        **exclusion_figures(holds),
    }
    if cfg.why and lib in MINE:
        row["why"] = why_figures([r[8] for r in window.reports if len(r) > 8])
    return add_errors(row, worker_errors(window.reports, nproc))


# -- 3. two of five servers paused ---------------------------------------------------------


def paused_worker(
    lib: str, urls: list[str], name: str, iters: int, events: Any, go: Any, results: Any
) -> None:
    """After ``go`` (2 servers paused by then): ``iters`` x acquire, release, each timed."""
    proc = None
    try:
        proc = Proc(lib, urls)
        for text in proc.warm_up(name):
            results.put(("warm", -1, text))
        lock = proc.backend.lock(name)
        proc.once(lock)  # this lock's scripts and connections too, while all servers answer
        events.put(("ready", 0))
        if not wait_flag(go, 120):
            return
        for i in range(iters):
            results.put(("calling", i, now_ns()))
            item = proc.run(_paused_once_async(lock)) if proc.is_async else _paused_once(lock)
            results.put(("iter", i, *item))
        results.put(("done", iters, now_ns()))
    except BaseException as exc:
        results.put(("error", -1, error_text(exc)))
    finally:
        if proc is not None:
            proc.close()


def _paused_once(lock: Any) -> tuple[bool, int, int, str]:
    t0 = now_ns()
    try:
        ok = bool(lock.acquire())
    except Exception as exc:
        return False, now_ns() - t0, 0, "acquire: " + error_text(exc)
    t1 = now_ns()
    err = ""
    if ok:
        try:
            lock.release()
        except Exception as exc:
            err = "release: " + error_text(exc)
    return ok, t1 - t0, now_ns() - t1, err


async def _paused_once_async(lock: Any) -> tuple[bool, int, int, str]:
    t0 = now_ns()
    try:
        ok = bool(await lock.acquire())
    except Exception as exc:
        return False, now_ns() - t0, 0, "acquire: " + error_text(exc)
    t1 = now_ns()
    err = ""
    if ok:
        try:
            await lock.release()
        except Exception as exc:
            err = "release: " + error_text(exc)
    return ok, t1 - t0, now_ns() - t1, err


def bench_paused(cfg: Config, ctx: Any, lib: str, servers: list[Any], run_id: str) -> dict:
    """Pause the last two of five servers around one child's acquire/release loop."""
    name = f"bench:{run_id}:paused:{lib}"
    events, results = ctx.Queue(), ctx.Queue()
    go = new_flag(ctx)
    urls = cfg.urls[:5]
    child = start_child(ctx, paused_worker, lib, urls, name, cfg.pause_iters, events, go, results)
    row: dict[str, Any] = {"iters": cfg.pause_iters, "budget_s": cfg.pause_budget}
    iters: list[tuple[bool, int, int, str]] = []
    paused: list[Any] = []
    pending_since = None
    try:
        wait_events(events, "ready", 1, timeout=60)
        for server in servers[3:5]:
            server.pause()
            paused.append(server)
        go.value = 1
        deadline = time.monotonic() + cfg.pause_budget
        done = False
        while not done and time.monotonic() < deadline:
            try:
                item = results.get(timeout=0.1)
            except queue.Empty:
                if not child.is_alive():
                    break
                continue
            if item[0] == "calling":
                pending_since = item[2]
            elif item[0] == "iter":
                iters.append(tuple(item[2:]))
                pending_since = None
            elif item[0] == "done":
                done = True
            elif item[0] == "warm":
                row.setdefault("warm_up_errors", []).append(item[2])
            elif item[0] == "error":
                row["error"] = item[2]
                break
        if not done and "error" not in row:
            stuck = (now_ns() - pending_since) / 1e9 if pending_since else None
            row["stuck_s"] = stuck
            row["note"] = (
                f"call {len(iters) + 1} still running after {stuck:.1f} s: gave up"
                if stuck is not None
                else "no progress within the time limit"
            )
    finally:
        go.value = 1
        reap([child], grace=1.0)
        for server in paused:
            with contextlib.suppress(Exception):
                server.resume()
    acq = sorted(x[1] for x in iters if x[0])
    rel = sorted(x[2] for x in iters if x[0])
    row.update(
        completed=len(iters),
        acquired=sum(1 for x in iters if x[0]),
        first_acquire_ms=(iters[0][1] / 1e6) if iters else None,
        acquire_p50_ms=pct(acq, 50) / 1e6 if acq else None,
        acquire_max_ms=acq[-1] / 1e6 if acq else None,
        release_p50_ms=pct(rel, 50) / 1e6 if rel else None,
        errors=[x[3] for x in iters if x[3]][:3],
    )
    return row


# -- report --------------------------------------------------------------------------------

CHECKED: list[str] = []  # the targets that were evaluated (passed or not)


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    env = data["env"]
    print_header(
        f"redlease Redlock benchmark  |  {env['servers']} x {env['server']}  |  redis-py"
        f" {env['redis_py']}  |  pottery {env['pottery']}  |  aioredlock {env['aioredlock']}"
        f"  |  Python {env['python']}  |  {env['cpus']} CPUs  |  load avg {env['load_before']}"
        f" -> {env['load_after']}",
        cfg.quick,
    )
    if data["uncontended"]:
        _report_uncontended(cfg, data["uncontended"], failed)
    if data["contended"]:
        _report_contended(cfg, data["contended"], failed)
    if data["paused"]:
        _report_paused(cfg, data["paused"])
    print()
    if failed:
        print("Targets missed: " + "; ".join(failed))
    elif not CHECKED:
        print("No target was measured (they need redlease, and pottery for section 2).")
    else:
        print(f"All targets met ({len(CHECKED)} checked).")
    return failed


def _report_uncontended(cfg: Config, u: dict[str, Any], failed: list[str]) -> None:
    lo, hi = min(SIZES), max(SIZES)
    print_section(
        f"1. Uncontended acquire+release, 1 and {hi} servers: {cfg.iters} iterations per row"
        f" after {cfg.warm} warm-up, interleaved in {cfg.rounds} rounds"
    )
    rows = []
    labels = {**FLOORS, **LIBS}
    for base in [*FLOORS, *cfg.libs]:
        for n in SIZES:
            row = u.get(f"{base}/{n}")
            label = f"{labels[base]}  N={n}"
            if row is None:
                continue
            if "error" in row:
                rows.append(error_row(label, row))
                if base in MINE:
                    failed.append(f"uncontended {base} N={n} not measured")
                continue
            scaling = adjusted = target = ""
            if n == hi and row.get("scaling"):
                scaling = f"{row['scaling']:.2f}x"
                if row.get("scaling_over_floor"):
                    adjusted = f"{row['scaling_over_floor']:.2f}x"
            if n == hi and base in MINE:
                # The target: the do-nothing Redlock of the same kind over the same servers
                # (five servers on two cores cost even it ~2x one server).
                if row.get("ratio_nothing"):
                    ok = row["ratio_nothing"] <= TARGET_VS_NOTHING
                    CHECKED.append(f"uncontended {base}")
                    target = f"<= {TARGET_VS_NOTHING:.2f}x  {verdict(ok)}"
                    if not ok:
                        failed.append(
                            f"uncontended {base} N={hi} {row['ratio_nothing']:.2f}x do-nothing"
                        )
                else:
                    failed.append(f"uncontended {base} vs do-nothing not measured")
            rows.append(
                [
                    label,
                    fmt(row["ops_per_s"], ",.0f"),
                    fmt(row["p50_us"], ",.0f"),
                    fmt(row["p99_us"], ",.0f"),
                    f"{row['ratio_floor']:.2f}x" if row.get("ratio_floor") else "",
                    f"{row['ratio_nothing']:.2f}x" if row.get("ratio_nothing") else "",
                    scaling,
                    adjusted,
                    target,
                ]
            )
    print_table(
        [
            "library",
            "ops/s",
            "p50 us",
            "p99 us",
            "p50/floor",
            "p50/do-nothing",
            f"N={hi}/N={lo} p50",
            "/ floor's",
            f"target N={hi}",
        ],
        rows,
        "lrrrrrrrl",
    )
    print(
        "   p50/floor: ÷ the raw floor of the same kind (sync: the do-nothing Redlock; asyncio:"
        " redis.asyncio + gather) over the same N; p50/do-nothing: ÷ the do-nothing Redlock of"
        " the same kind (one kept connection per server, SET NX PX written to all then read,"
        " compare-and-delete the same way) over the same N: the target, in this same run;"
        f" N={hi}/N={lo} p50: the row's p50 ÷ the same library's N={lo} p50;"
        " / floor's: that ratio ÷ the floor's own ratio (what the library adds to the"
        " machine's cost of talking to 5 servers)"
    )


def _report_contended(cfg: Config, c: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"2. Contended: {cfg.workers} processes on one lock, loop acquire -> tiny section ->"
        f" release for {cfg.contend_seconds:g} s (failed attempts are retried)"
    )
    rows = []
    loud: list[str] = []
    for nserv in cfg.contend_servers:
        for lib in cfg.libs:
            row = c.get(f"{lib}/{nserv}")
            if row is None:
                continue
            label = f"{LIBS[lib]}  N={nserv}"
            if "error" in row and not row.get("acquisitions"):
                rows.append(error_row(label, row))
                if lib in MINE:
                    failed.append(f"contended {lib} N={nserv} not measured")
                continue
            excl = exclusion_verdict(
                row, f"{LIBS[lib]} N={nserv}", f"{lib} N={nserv}", loud, failed
            )
            if lib in MINE and row["starved"]:
                failed.append(f"contended {lib} N={nserv}: {row['starved']} process(es) starved")
            errs = row["call_errors"]
            rows.append(
                [
                    label,
                    fmt(row["acq_per_s"], ",.0f"),
                    fmt(row["failed_per_s"], ",.0f") + (f" +{errs} err" if errs else ""),
                    fmt(row["handoff_p50_us"], ",.0f"),
                    f"{row['same_process_regrab'] * 100:.0f}%",
                    fmt(row["longest_wait_ms"], ",.0f"),
                    f"{row['per_process_min']}/{row['per_process_max']}",
                    str(row["starved"]),
                    fmt(row["client_cpu_us_per_acq"], ",.0f"),
                    fmt(row["server_cpu_us_per_acq"], ",.0f"),
                    fmt(row["cpu_s_per_s"], ".2f"),
                    fmt(row.get("scripts_per_acq"), ".1f"),
                    fmt(row.get("commands_per_acq"), ".0f"),
                    fmt(row.get("messages_per_acq"), ".1f"),
                    excl,
                ]
            )
    print_table(
        [
            "library",
            "acq/s",
            "failed/s",
            "hand-off p50 us",
            "same-proc",
            "longest wait ms",
            "per-proc min/max",
            "starved",
            "client CPU us/acq",
            "servers CPU us/acq",
            "CPU s/s",
            "scripts/acq",
            "cmds/acq",
            "msgs/acq",
            "exclusion",
        ],
        rows,
        "lrrrrrrrrrrrrrl",
    )
    for nserv in cfg.contend_servers:
        for lib in cfg.libs:
            row = c.get(f"{lib}/{nserv}", {})
            if row.get("warm_up_errors"):
                print(
                    f"   note: {LIBS[lib]} N={nserv}: {row['warm_up_errors']} warm-up call(s)"
                    f" failed before the run and were retried; first:"
                    f" {row['warm_up_error_example'][0][:160]}"
                )
            if row.get("call_errors"):
                print(
                    f"   note: {LIBS[lib]} N={nserv}: {row['call_errors']} call(s) raised during"
                    f" the run (retried); first: {row['call_error_example'][0][:160]}"
                )
    print_violations(loud)
    for nserv in cfg.contend_servers:
        peer = c.get(f"pottery/{nserv}", {})
        for mine in MINE:
            base = c.get(f"{mine}/{nserv}", {})
            if mine not in cfg.libs:
                continue
            if base.get("acq_per_s") and peer.get("acq_per_s"):
                ratio = base["acq_per_s"] / peer["acq_per_s"]
                ok = ratio >= TARGET_VS_POTTERY and base["starved"] == 0
                CHECKED.append(f"contended {mine}")
                print(
                    f"   N={nserv}: {LIBS[mine]} / pottery acq/s {ratio:.2f}x"
                    f" (target >= {TARGET_VS_POTTERY:g}x), starved {base['starved']}"
                    f" (target 0): {verdict(ok)}"
                )
                if ratio < TARGET_VS_POTTERY:
                    failed.append(f"contended {mine} N={nserv} {ratio:.2f}x pottery")
            elif mine in cfg.libs and "pottery" in cfg.libs:
                failed.append(f"contended {mine} vs pottery N={nserv} not measured")
    _report_why(cfg, c)
    print(
        "   CPU s/s: (all workers' + all servers' CPU) / window, out of"
        f" {os.cpu_count()} CPU s/s on this machine (shared with whatever else runs);"
        " scripts/acq: EVALSHA+EVAL calls on all servers per acquisition (pottery's acquire"
        " is a plain SET, not a script); cmds/acq: all commands, Lua-internal ones included"
    )


def _report_why(cfg: Config, c: dict[str, Any]) -> None:
    """``--why``: per acquisition, redlease's rounds by outcome and cause, messages by kind."""
    for nserv in cfg.contend_servers:
        for lib in MINE:
            why = c.get(f"{lib}/{nserv}", {}).get("why")
            if not why:
                continue
            print(f"   {LIBS[lib]} N={nserv}, per acquisition ({why['acquisitions']:.0f} traced):")
            for key, value in why.items():
                if key != "acquisitions":
                    print(f"      {key:<48} {value:6.2f}")


def _report_paused(cfg: Config, p: dict[str, Any]) -> None:
    print_section(
        f"3. Two of five servers paused (SIGSTOP), connections warmed before: {cfg.pause_iters}"
        f" x acquire+release, at most {cfg.pause_budget:g} s per library (informative)"
    )
    rows = []
    for lib in cfg.libs:
        row = p.get(lib)
        if row is None:
            continue
        if "error" in row and not row.get("completed"):
            rows.append(error_row(LIBS[lib], row))
            continue
        note = row.get("note", "")
        if row.get("errors"):
            note = (note + "; " if note else "") + row["errors"][0]
        rows.append(
            [
                LIBS[lib],
                f"{row['acquired']}/{row['iters']}",
                fmt(row["first_acquire_ms"], ",.1f"),
                fmt(row["acquire_p50_ms"], ",.1f"),
                fmt(row["acquire_max_ms"], ",.1f"),
                fmt(row["release_p50_ms"], ",.1f"),
                note[:110],
            ]
        )
    print_table(
        [
            "library",
            "acquired",
            "first acquire ms",
            "acquire p50 ms",
            "max ms",
            "release p50 ms",
            "note",
        ],
        rows,
        "lrrrrrl",
    )


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--urls", help="five servers instead of starting them (comma-separated)")
    p.add_argument("--quick", action="store_true", help="short smoke run (small samples)")
    p.add_argument("--json", metavar="FILE", help="write the raw figures to FILE")
    p.add_argument("--libs", default=",".join(LIBS), help=f"subset of: {', '.join(LIBS)}")
    p.add_argument("--sections", default="1,2,3", help="subset of the sections 1,2,3")
    p.add_argument(
        "--why",
        action="store_true",
        help="section 2: count redlease's rounds per acquisition and what started each",
    )
    p.add_argument(
        "--contend-servers",
        default="5",
        help="servers per lock in section 2, comma-separated (e.g. 1,5; default 5)",
    )
    return p.parse_args(argv)


def _start_servers() -> list[Any]:
    """Five private servers (all stopped again if one fails to start)."""
    from redlease.server import RedisServer

    servers: list[Any] = []
    try:
        for _ in range(5):
            servers.append(RedisServer().start())
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:
        return "not installed"


def _environment(cfg: Config) -> dict[str, Any]:
    """What is known before the first server is asked (its name and the load come later)."""
    import redis

    return {
        "redis_py": redis.__version__,
        "pottery": _version("pottery"),
        "aioredlock": _version("aioredlock"),
        "aioredis": _version("aioredis"),
        "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "servers": len(cfg.urls),
        "urls": cfg.urls,
        "quick": cfg.quick,
        "server": "?",
        "load_before": "?",
    }


def _run_sections(
    cfg: Config,
    sections: set[str],
    servers: list[Any],
    run_id: str,
    data: dict[str, Any],
    progress: Progress,
) -> None:
    import redis

    ctx = mp.get_context("spawn")
    probe = redis.Redis.from_url(cfg.urls[0], socket_timeout=5)
    info = probe.info("server")
    probe.close()
    data["env"]["server"] = server_name(info)
    data["env"]["load_before"] = load_average()
    if "1" in sections:
        progress.uncontended(data, lambda: bench_uncontended(cfg, run_id), "floor/1")
    if "2" in sections:
        progress.per_size(
            data["contended"],
            cfg.contend_servers,
            cfg.libs,
            lambda lib, n: bench_contended(cfg, ctx, lib, n, run_id),
        )
    if "3" in sections:
        if servers:
            progress.per_library(
                data["paused"], cfg.libs, lambda lib: bench_paused(cfg, ctx, lib, servers, run_id)
            )
        else:
            progress("section 3 skipped: it pauses servers, so it needs servers started here")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = {s.strip() for s in args.sections.split(",")}
    contend_servers = tuple(int(x) for x in args.contend_servers.split(",") if x.strip())
    if any(n < 1 or n > 5 for n in contend_servers):
        print("--contend-servers: between 1 and 5", file=sys.stderr)
        return 2
    interrupt_on_sigterm()
    servers: list[Any] = []
    if args.urls:
        urls = [u.strip() for u in args.urls.split(",") if u.strip()]
        if len(urls) < 5:
            print("--urls: five independent servers are needed", file=sys.stderr)
            return 2
        urls = urls[:5]
    else:
        servers = _start_servers()
        urls = [s.url for s in servers]
    if args.quick:
        cfg = Config(urls, True, libs, 600, 100, 4, 16, contend_servers, 1.0, 3, 8.0, args.why)
    else:
        cfg = Config(urls, False, libs, 3000, 300, 10, 16, contend_servers, 3.0, 5, 12.0, args.why)

    run_id = secrets.token_hex(4)
    data: dict[str, Any] = {
        "env": _environment(cfg),
        "uncontended": {},
        "contended": {},
        "paused": {},
    }
    progress = Progress()
    try:
        _run_sections(cfg, sections, servers, run_id, data, progress)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        reap_all()
        for server in servers:
            with contextlib.suppress(Exception):
                server.resume()
            with contextlib.suppress(Exception):
                server.stop()
        if not servers:
            for url in urls:
                delete_run_keys(url, run_id)
        data["env"]["load_after"] = load_average()
        data["env"]["elapsed_s"] = progress.elapsed()
    progress("done")
    failed = report(cfg, data)
    data["failed_targets"] = failed
    data["checked_targets"] = list(CHECKED)
    if args.json:
        write_json(args.json, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
