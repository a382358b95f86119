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
The process plumbing (start flags, reaping, bounded waits) and the table printer come from
``handoff.py`` next to this file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import logging
import multiprocessing as mp
import os
import platform
import queue
import secrets
import signal
import sys
import time
import traceback
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.metadata import version
from typing import Any

from handoff import (
    _cpu_s,
    _error_text,
    collect,
    fmt,
    new_flag,
    now_ns,
    pct,
    print_table,
    reap,
    reap_all,
    start_child,
    verdict,
    wait_events,
    wait_flag,
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
    "floor": "raw floor: SET NX PX + EVALSHA del, write all then read",
    "floor-async": "raw floor, redis.asyncio + gather",
}
TTL = 10.0  # the common lease, seconds
SIZES = (1, 5)  # servers per lock in section 1

# Targets (ratios of figures from the same run).
TARGET_SCALING = 1.5  # redlease: p50 over 5 servers / p50 over 1 server
TARGET_VS_POTTERY = 5.0  # redlease contended acquisitions/s / pottery's


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
        if self.lib == "redlease":
            import redlease

            return redlease.Redlock(self.clients, name, ttl=TTL)
        if self.lib == "redlease-async":
            import redlease.asyncio

            return redlease.asyncio.Redlock(self.clients, name, ttl=TTL)
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
        """Connect, load scripts, start helpers: on a lock nobody else uses.

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
                errors.append(_error_text(exc))
                time.sleep(0.05)
            if done == 3:
                return errors
        raise RuntimeError(f"warm-up failed {len(errors)} times; first: {errors[0]}")

    def close(self) -> None:
        if self.loop is None:
            self.backend.close()
            return
        # aioredlock logs every unlock its background clean-up cannot finish once the
        # pools are closed: expected at teardown, and noise on the terminal.
        logging.getLogger("aioredlock").setLevel(logging.CRITICAL)
        loop = self.loop
        with contextlib.suppress(Exception):
            loop.run_until_complete(self.backend.aclose())
        with contextlib.suppress(Exception):
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for task in pending:
                task.cancel()
            if pending:
                loop.run_until_complete(
                    asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
                )
        loop.close()
        self.loop = None


CAD_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)


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


# -- 1. uncontended ------------------------------------------------------------------------


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Every (library, N) row and the floors, interleaved so that load bursts hit all alike."""
    import redis

    loop = asyncio.new_event_loop()
    ops: dict[str, tuple[bool, Callable[[], Any]]] = {}
    errors: dict[str, str] = {}
    closers: list[Callable[[], None]] = []
    aclosers: list[Callable[[], Any]] = []

    try:
        sha = ""
        for url in cfg.urls[: max(SIZES)]:
            probe = redis.Redis.from_url(url)
            sha = probe.script_load(CAD_SCRIPT)
            probe.close()

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

        for lib in cfg.libs:
            for n in SIZES:
                key = f"{lib}/{n}"
                name = f"bench:{run_id}:solo:{lib}:{n}"
                try:
                    if lib in ASYNC_LIBS:
                        backend = loop.run_until_complete(Backend.open_async(lib, cfg.urls[:n]))
                        aclosers.append(backend.aclose)
                        alock = backend.lock(name)

                        async def aop(alock: Any = alock) -> None:
                            if not await alock.acquire():
                                raise RuntimeError("uncontended acquire failed")
                            await alock.release()

                        ops[key] = (True, aop)
                    else:
                        backend = Backend(lib, cfg.urls[:n])
                        closers.append(backend.close)
                        slock = backend.lock(name)

                        def sop(slock: Any = slock) -> None:
                            if not slock.acquire():
                                raise RuntimeError("uncontended acquire failed")
                            slock.release()

                        ops[key] = (False, sop)
                except Exception as exc:
                    errors[key] = _error_text(exc)

        lat: dict[str, list[int]] = {k: [] for k in ops}
        wall: dict[str, int] = {k: 0 for k in ops}

        def batch(key: str, count: int, keep: bool) -> None:
            is_async, fn = ops[key]
            out = lat[key] if keep else []
            pc = time.perf_counter_ns
            if is_async:

                async def go() -> None:
                    for _ in range(count):
                        t0 = pc()
                        await asyncio.wait_for(fn(), 30)
                        out.append(pc() - t0)

                t_start = pc()
                loop.run_until_complete(go())
            else:
                t_start = pc()
                for _ in range(count):
                    t0 = pc()
                    fn()
                    out.append(pc() - t0)
            if keep:
                wall[key] += pc() - t_start

        for key in list(ops):
            try:
                batch(key, cfg.warm, keep=False)
            except Exception as exc:
                errors[key] = _error_text(exc)
                del ops[key]
        per_round = max(1, cfg.iters // cfg.rounds)
        keys = list(ops)
        for rnd in range(cfg.rounds):
            order = keys[rnd % len(keys) :] + keys[: rnd % len(keys)]
            for key in order:
                if key not in ops:
                    continue
                try:
                    batch(key, per_round, keep=True)
                except Exception as exc:
                    errors[key] = _error_text(exc)
                    del ops[key]
    finally:
        for close in closers:
            with contextlib.suppress(Exception):
                close()
        for aclose in aclosers:
            with contextlib.suppress(Exception):
                loop.run_until_complete(asyncio.wait_for(aclose(), 5))
        with contextlib.suppress(Exception):
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(
                    asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
                )
        loop.close()

    out: dict[str, Any] = {}
    for key, values in lat.items():
        if key in errors or not values:
            continue
        values.sort()
        out[key] = {
            "n": len(values),
            "ops_per_s": len(values) / (wall[key] / 1e9),
            "p50_us": pct(values, 50) / 1000,
            "p99_us": pct(values, 99) / 1000,
            "mean_us": sum(values) / len(values) / 1000,
            "samples_ns": values,
        }
    for key, err in errors.items():
        out[key] = {"error": err}
    lo, hi = min(SIZES), max(SIZES)
    for base in [*FLOORS, *cfg.libs]:
        a, b = out.get(f"{base}/{lo}", {}), out.get(f"{base}/{hi}", {})
        if a.get("p50_us") and b.get("p50_us"):
            b["scaling"] = b["p50_us"] / a["p50_us"]
    for lib in cfg.libs:
        floor_kind = "floor-async" if lib in ASYNC_LIBS else "floor"
        for n in SIZES:
            row, floor_row = out.get(f"{lib}/{n}", {}), out.get(f"{floor_kind}/{n}", {})
            if row.get("p50_us") and floor_row.get("p50_us"):
                row["ratio_floor"] = row["p50_us"] / floor_row["p50_us"]
        row, floor_row = out.get(f"{lib}/{hi}", {}), out.get(f"{floor_kind}/{hi}", {})
        if row.get("scaling") and floor_row.get("scaling"):
            row["scaling_over_floor"] = row["scaling"] / floor_row["scaling"]
    return out


async def _async_clients(urls: Sequence[str]) -> list[Any]:
    import redis.asyncio

    return [redis.asyncio.Redis.from_url(u) for u in urls]


# -- 2. contended --------------------------------------------------------------------------


def contend_worker(
    lib: str,
    urls: list[str],
    name: str,
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
    try:
        proc = Proc(lib, urls)
        warm_errors = proc.warm_up(name)
        lock = proc.backend.lock(name)
        events.put(("ready", wid))
        if not wait_flag(start_ns, 120):
            results.put((wid, None, "never started", 0.0, 0, 0, "", warm_errors))
            return
        start = start_ns.value
        end = start + duration_ns
        delay = (start - now_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        cpu0 = _cpu_s()
        if proc.is_async:
            rec, failed, errors, first = proc.run(_contend_async(lock, end))
        else:
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
                    first = first or _error_text(exc)
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
                    first = first or _error_text(exc)
                rec.extend((t_want, t_acq, t_rel))
                t_want = 0
        results.put((wid, rec.tobytes(), None, _cpu_s() - cpu0, failed, errors, first, warm_errors))
    except BaseException as exc:
        text = _error_text(exc)
        events.put(("error", text))
        detail = text + "\n" + traceback.format_exc(limit=4)
        results.put((wid, None, detail, 0.0, 0, 0, "", []))
    finally:
        if proc is not None:
            proc.close()


async def _contend_async(lock: Any, end: int) -> tuple[array, int, int, str]:
    rec, failed, errors, first = array("q"), 0, 0, ""
    t_want = 0
    while now_ns() < end:
        t_call = now_ns()
        t_want = t_want or t_call
        try:
            ok = await lock.acquire()
        except Exception as exc:
            errors += 1
            first = first or _error_text(exc)
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
            first = first or _error_text(exc)
        rec.extend((t_want, t_acq, t_rel))
        t_want = 0
    return rec, failed, errors, first


def _server_counters(probes: list[Any]) -> tuple[float, int, int]:
    """Summed over the servers: CPU seconds, script calls (EVALSHA + EVAL), all commands.

    Redis 7 counts the commands a script runs in both commandstats and the total.
    """
    cpu, scripts, commands = 0.0, 0, 0
    for probe in probes:
        info = probe.info("cpu")
        cpu += float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
        stats = probe.info("commandstats")
        scripts += sum(
            int(stats.get(f"cmdstat_{c}", {}).get("calls", 0)) for c in ("evalsha", "eval")
        )
        commands += int(probe.info("stats")["total_commands_processed"])
    return cpu, scripts, commands


def bench_contended(cfg: Config, ctx: Any, lib: str, nserv: int, run_id: str) -> dict[str, Any]:
    import redis

    nproc = cfg.workers
    urls = cfg.urls[:nserv]
    name = f"bench:{run_id}:contend:{lib}:{nserv}"
    events, results = ctx.Queue(), ctx.Queue()
    start_ns = new_flag(ctx)  # 0 until the start time is set
    duration_ns = int(cfg.contend_seconds * 1e9)
    probes = [redis.Redis.from_url(u, socket_timeout=5) for u in urls]
    server_cpu = float("nan")
    scripts = commands = -1
    start = end = 0
    got: list[Any] = []
    procs = [
        start_child(ctx, contend_worker, lib, urls, name, w, events, start_ns, duration_ns, results)
        for w in range(nproc)
    ]
    try:
        wait_events(events, "ready", nproc, timeout=60 + 5 * nproc)
        start = now_ns() + int(0.3e9)
        start_ns.value = start
        time.sleep(max(0.0, (start - now_ns()) / 1e9))
        cpu0, scripts0, commands0 = _server_counters(probes)
        end = start + duration_ns
        time.sleep(max(0.0, (end - now_ns()) / 1e9))
        cpu1, scripts1, commands1 = _server_counters(probes)
        server_cpu, scripts, commands = cpu1 - cpu0, scripts1 - scripts0, commands1 - commands0
        got = collect(results, nproc, timeout=30.0, procs=procs)
    finally:
        if not start_ns.value:
            start_ns.value = now_ns()
        for probe in probes:
            probe.close()
        reap(procs, grace=5.0)
    errors = [e for _, _, e, *_ in got if e]
    if len(got) < nproc:
        errors.append(f"{nproc - len(got)} worker(s) did not report within the time limit")
    holds: list[tuple[int, int, int, int]] = []  # (t_acq, t_rel, wid, t_want)
    per_proc: dict[int, int] = {w: 0 for w in range(nproc)}
    client_cpu = sum(g[3] for g in got)
    failed = sum(g[4] for g in got)
    call_errors = sum(g[5] for g in got)
    first_errors = [g[6] for g in got if g[6]]
    warm_errors = [e for g in got for e in g[7]]
    for wid, raw, *_ in got:
        if raw is None:
            continue
        rec = array("q")
        rec.frombytes(raw)
        for i in range(0, len(rec), 3):
            t_want, t_acq, t_rel = rec[i], rec[i + 1], rec[i + 2]
            holds.append((t_acq, t_rel, wid, t_want))
            if start <= t_acq < end:
                per_proc[wid] += 1
    holds.sort()
    violations = []
    gaps: list[int] = []
    same = 0
    max_rel, max_rel_wid = None, None
    for i, (t_acq, t_rel, wid, _) in enumerate(holds):
        if max_rel is not None and t_acq < max_rel:
            violations.append(
                {"index": i, "overlap_ns": max_rel - t_acq, "holders": [max_rel_wid, wid]}
            )
        if i:
            prev = holds[i - 1]
            if prev[2] != wid:
                gaps.append(t_acq - prev[1])
            else:
                same += 1
        if max_rel is None or t_rel > max_rel:
            max_rel, max_rel_wid = t_rel, wid
    gaps.sort()
    waits = sorted(h[0] - h[3] for h in holds)
    in_window = sum(per_proc.values())
    busy = sum(
        min(t_rel, end) - max(t_acq, start)
        for t_acq, t_rel, _, _ in holds
        if t_acq < end and t_rel > start
    )
    row: dict[str, Any] = {
        "processes": nproc,
        "servers": nserv,
        "seconds": cfg.contend_seconds,
        "acquisitions": in_window,
        "acq_per_s": in_window / cfg.contend_seconds,
        "failed_attempts": failed,
        "failed_per_s": failed / cfg.contend_seconds,
        "call_errors": call_errors,
        "call_error_example": first_errors[:1],
        "warm_up_errors": len(warm_errors),
        "warm_up_error_example": warm_errors[:1],
        "handoffs": len(gaps),
        "handoff_p50_us": pct(gaps, 50) / 1000,
        "handoff_p99_us": pct(gaps, 99) / 1000,
        "same_process_regrab": same / max(1, len(holds) - 1),
        "longest_wait_ms": (waits[-1] / 1e6) if waits else float("nan"),
        "wait_p99_ms": pct(waits, 99) / 1e6,
        "per_process_min": min(per_proc.values()) if per_proc else 0,
        "per_process_max": max(per_proc.values()) if per_proc else 0,
        "starved": sum(1 for v in per_proc.values() if v == 0),
        "per_process": per_proc,
        "held_share": busy / max(1, end - start),
        "client_cpu_us_per_acq": client_cpu / max(1, len(holds)) * 1e6,
        "server_cpu_us_per_acq": server_cpu / max(1, in_window) * 1e6,
        "cpu_s_per_s": (client_cpu + server_cpu) / cfg.contend_seconds,
        "scripts_per_acq": scripts / max(1, in_window) if scripts >= 0 else None,
        "commands_per_acq": commands / max(1, in_window) if commands >= 0 else None,
        "violations": len(violations),
        "violation_examples": violations[:5],
    }
    if errors:
        row["error"] = "; ".join(e.splitlines()[0] for e in errors[:3])
        row["error_detail"] = errors[:3]
    return row


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
        results.put(("error", -1, _error_text(exc)))
    finally:
        if proc is not None:
            proc.close()


def _paused_once(lock: Any) -> tuple[bool, int, int, str]:
    t0 = now_ns()
    try:
        ok = bool(lock.acquire())
    except Exception as exc:
        return False, now_ns() - t0, 0, "acquire: " + _error_text(exc)
    t1 = now_ns()
    err = ""
    if ok:
        try:
            lock.release()
        except Exception as exc:
            err = "release: " + _error_text(exc)
    return ok, t1 - t0, now_ns() - t1, err


async def _paused_once_async(lock: Any) -> tuple[bool, int, int, str]:
    t0 = now_ns()
    try:
        ok = bool(await lock.acquire())
    except Exception as exc:
        return False, now_ns() - t0, 0, "acquire: " + _error_text(exc)
    t1 = now_ns()
    err = ""
    if ok:
        try:
            await lock.release()
        except Exception as exc:
            err = "release: " + _error_text(exc)
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
    print()
    print(
        f"redlease Redlock benchmark  |  {env['servers']} x {env['server']}  |  redis-py"
        f" {env['redis_py']}  |  pottery {env['pottery']}  |  aioredlock {env['aioredlock']}"
        f"  |  Python {env['python']}  |  {env['cpus']} CPUs  |  load avg {env['load_before']}"
        f" -> {env['load_after']}"
    )
    if cfg.quick:
        print("QUICK RUN: small samples, figures are indicative only")
    if data["uncontended"]:
        failed += _report_uncontended(cfg, data["uncontended"])
    if data["contended"]:
        failed += _report_contended(cfg, data["contended"])
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


def _report_uncontended(cfg: Config, u: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    lo, hi = min(SIZES), max(SIZES)
    print()
    print(
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
                rows.append([label, f"ERROR: {row['error']}"])
                if base in MINE:
                    failed.append(f"uncontended {base} N={n} not measured")
                continue
            scaling = adjusted = target = ""
            if n == hi and row.get("scaling"):
                scaling = f"{row['scaling']:.2f}x"
                if row.get("scaling_over_floor"):
                    adjusted = f"{row['scaling_over_floor']:.2f}x"
                if base in MINE:
                    ok = row["scaling"] <= TARGET_SCALING
                    CHECKED.append(f"uncontended {base}")
                    target = f"<= {TARGET_SCALING:.2f}x  {verdict(ok)}"
                    if not ok:
                        failed.append(f"uncontended {base} N={hi}/N={lo} {row['scaling']:.2f}x")
            elif n == hi and base in MINE:
                failed.append(f"uncontended {base} scaling not measured")
            rows.append(
                [
                    label,
                    fmt(row["ops_per_s"], ",.0f"),
                    fmt(row["p50_us"], ",.0f"),
                    fmt(row["p99_us"], ",.0f"),
                    f"{row['ratio_floor']:.2f}x" if row.get("ratio_floor") else "",
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
            f"N={hi}/N={lo} p50",
            "/ floor's",
            "target",
        ],
        rows,
        "lrrrrrrl",
    )
    print(
        "   p50/floor: ÷ the raw floor of the same kind (sync or asyncio) over the same N;"
        f" N={hi}/N={lo} p50: the row's p50 ÷ the same library's N={lo} p50;"
        " / floor's: that ratio ÷ the floor's own ratio (what the library adds to the"
        " machine's cost of talking to 5 servers)"
    )
    return failed


def _report_contended(cfg: Config, c: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    print()
    print(
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
                rows.append([label, f"ERROR: {row['error']}"])
                if lib in MINE:
                    failed.append(f"contended {lib} N={nserv} not measured")
                continue
            excl = "OK" if row["violations"] == 0 else f"VIOLATED x{row['violations']}"
            if row["violations"]:
                loud.append(f"{LIBS[lib]} N={nserv}: {row['violations']} overlapping holds")
                failed.append(f"mutual exclusion {lib} N={nserv}")
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
                    excl + (" (worker error)" if "error" in row else ""),
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
            "exclusion",
        ],
        rows,
        "lrrrrrrrrrrrrl",
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
    if loud:
        print()
        print("!" * 78)
        for text in loud:
            print(f"!!! MUTUAL EXCLUSION VIOLATED: {text}")
        print("!" * 78)
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
    print(
        "   CPU s/s: (all workers' + all servers' CPU) / window, out of"
        f" {os.cpu_count()} CPU s/s on this machine (shared with whatever else runs);"
        " scripts/acq: EVALSHA+EVAL calls on all servers per acquisition (pottery's acquire"
        " is a plain SET, not a script); cmds/acq: all commands, Lua-internal ones included"
    )
    return failed


def _report_paused(cfg: Config, p: dict[str, Any]) -> None:
    print()
    print(
        f"3. Two of five servers paused (SIGSTOP), connections warmed before: {cfg.pause_iters}"
        f" x acquire+release, at most {cfg.pause_budget:g} s per library (informative)"
    )
    rows = []
    for lib in cfg.libs:
        row = p.get(lib)
        if row is None:
            continue
        if "error" in row and not row.get("completed"):
            rows.append([LIBS[lib], f"ERROR: {row['error']}"])
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


def _delete_keys(urls: list[str], run_id: str) -> None:
    """On servers we did not start: delete this run's keys (redlease's fence keys persist)."""
    import redis

    for url in urls:
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


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--urls", help="five servers instead of starting them (comma-separated)")
    p.add_argument("--quick", action="store_true", help="short smoke run (small samples)")
    p.add_argument("--json", metavar="FILE", help="write the raw figures to FILE")
    p.add_argument("--libs", default=",".join(LIBS), help=f"subset of: {', '.join(LIBS)}")
    p.add_argument("--sections", default="1,2,3", help="subset of the sections 1,2,3")
    p.add_argument(
        "--contend-servers",
        default="5",
        help="servers per lock in section 2, comma-separated (e.g. 1,5; default 5)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = [x.strip() for x in args.libs.split(",") if x.strip()]
    unknown = [x for x in libs if x not in LIBS]
    if unknown:
        print(f"unknown libraries: {unknown}; choose from {list(LIBS)}", file=sys.stderr)
        return 2
    sections = {s.strip() for s in args.sections.split(",")}
    contend_servers = tuple(int(x) for x in args.contend_servers.split(",") if x.strip())
    if any(n < 1 or n > 5 for n in contend_servers):
        print("--contend-servers: between 1 and 5", file=sys.stderr)
        return 2

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # run the clean-up below: children reaped, servers stopped

    signal.signal(signal.SIGTERM, on_term)
    servers: list[Any] = []
    if args.urls:
        urls = [u.strip() for u in args.urls.split(",") if u.strip()]
        if len(urls) < 5:
            print("--urls: five independent servers are needed", file=sys.stderr)
            return 2
        urls = urls[:5]
    else:
        from redlease.server import RedisServer

        try:
            for _ in range(5):
                servers.append(RedisServer().start())
        except BaseException:
            for server in servers:
                server.stop()
            raise
        urls = [s.url for s in servers]
    if args.quick:
        cfg = Config(urls, True, libs, 600, 100, 4, 16, contend_servers, 1.0, 3, 8.0)
    else:
        cfg = Config(urls, False, libs, 3000, 300, 10, 16, contend_servers, 3.0, 5, 12.0)

    import redis

    def _version(dist: str) -> str:
        try:
            return version(dist)
        except Exception:
            return "not installed"

    run_id = secrets.token_hex(4)
    data: dict[str, Any] = {
        "env": {
            "redis_py": redis.__version__,
            "pottery": _version("pottery"),
            "aioredlock": _version("aioredlock"),
            "aioredis": _version("aioredis"),
            "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "servers": len(urls),
            "urls": urls,
            "quick": cfg.quick,
            "server": "?",
            "load_before": "?",
        },
        "uncontended": {},
        "contended": {},
        "paused": {},
    }
    ctx = mp.get_context("spawn")
    t_begin = time.monotonic()

    def progress(text: str) -> None:
        print(f"[{time.monotonic() - t_begin:6.1f}s] {text}", file=sys.stderr, flush=True)

    def guarded(section: dict[str, Any], key: str, fn: Callable[[], dict[str, Any]]) -> None:
        progress(key)
        try:
            section[key] = fn()
        except Exception as exc:
            section[key] = {"error": _error_text(exc)}

    try:
        probe = redis.Redis.from_url(urls[0], socket_timeout=5)
        info = probe.info("server")
        probe.close()
        data["env"]["server"] = (
            f"{'valkey' if 'valkey_version' in info else 'redis'}"
            f" {info.get('valkey_version') or info.get('redis_version')}"
        )
        data["env"]["load_before"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        if "1" in sections:
            progress("uncontended")
            try:
                data["uncontended"] = bench_uncontended(cfg, run_id)
            except Exception as exc:
                data["uncontended"] = {"floor/1": {"error": _error_text(exc)}}
        if "2" in sections:
            for nserv in cfg.contend_servers:
                for lib in libs:
                    guarded(
                        data["contended"],
                        f"{lib}/{nserv}",
                        lambda lib=lib, n=nserv: bench_contended(cfg, ctx, lib, n, run_id),
                    )
        if "3" in sections:
            if servers:
                for lib in libs:
                    guarded(
                        data["paused"],
                        lib,
                        lambda lib=lib: bench_paused(cfg, ctx, lib, servers, run_id),
                    )
            else:
                progress("section 3 skipped: it pauses servers, so it needs servers started here")
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
            _delete_keys(urls, run_id)
        data["env"]["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        data["env"]["elapsed_s"] = time.monotonic() - t_begin
    progress("done")
    failed = report(cfg, data)
    data["failed_targets"] = failed
    data["checked_targets"] = list(CHECKED)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(data, fh, indent=1, default=str)
        print(f"raw figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
