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
import json
import math
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
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# -- libraries under test ------------------------------------------------------------------

LIBS: dict[str, str] = {
    "redlease": "redlease Lock",
    "redlease-async": "redlease.asyncio Lock",
    "redis-py": "redis-py Lock (sleep=0.1)",
    "python-redis-lock": "python-redis-lock",
}
ASYNC_LIBS = {"redlease-async"}
DIAG_NORENEW = "redlease-norenew"  # section 1 only: redlease.Lock(renew=False), a diagnostic row

# Targets (all ratios of figures from the same run).
TARGET_UNCONTENDED = 1.10  # redlease sync p50 / raw floor p50
TARGET_WAIT_CMDS = 0.0  # redlease commands per second per blocked waiter
TARGET_RECOVERY_SLACK = 0.050  # s: kill -> acquire within ttl + this
JOIN_AT = 0.4  # crash test: the waiter starts waiting this fraction of the ttl after the holder


def now_ns() -> int:
    """The system-wide monotonic clock: comparable across processes on this machine."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def make_sync_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    """A lock object with ``acquire()`` / ``release()``: each library with its defaults."""
    if lib == "redlease":
        import redlease

        return redlease.Lock(client, name, ttl=ttl)
    if lib == "redis-py":
        return client.lock(name, timeout=ttl)
    if lib == "python-redis-lock":
        import redis_lock

        return redis_lock.Lock(client, name, expire=int(ttl))
    raise ValueError(f"unknown sync library {lib!r}")


def make_async_lock(lib: str, client: Any, name: str, ttl: float) -> Any:
    if lib == "redlease-async":
        import redlease.asyncio

        return redlease.asyncio.Lock(client, name, ttl=ttl)
    raise ValueError(f"unknown asyncio library {lib!r}")


def lease_key(lib: str, name: str) -> str:
    """The Redis key whose PTTL is the holder's lease, per library."""
    if lib in ("redlease", "redlease-async"):
        return f"redlease:{{{name}}}:lock"
    if lib == "redis-py":
        return name
    if lib == "python-redis-lock":
        return f"lock:{name}"
    raise ValueError(lib)


def sync_client(url: str) -> Any:
    import redis

    return redis.Redis.from_url(url)


def async_client(url: str) -> Any:
    import redis.asyncio

    return redis.asyncio.Redis.from_url(url)


CAD_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)


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
        loop = self.loop
        with contextlib.suppress(Exception):
            loop.run_until_complete(asyncio.wait_for(self.client.aclose(), 5))
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


async def _async_make(url: str) -> Any:
    return async_client(url)


def warm_up(side: Side, name: str) -> None:
    """Connect, load scripts, start background helpers: on a lock nobody else uses."""
    lock = side.lock(f"{name}:warm:{os.getpid()}", 10.0)
    for _ in range(3):
        side.once(lock)


def _cpu_s() -> float:
    """CPU seconds (user + system) of this whole process, all threads."""
    t = os.times()
    return t.user + t.system


def _server_cpu(probe: Any) -> float:
    info = probe.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _error_text(exc: BaseException) -> str:
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


# -- child processes -----------------------------------------------------------------------
#
# Every child reports ("ready", id) on `events` once connected and warmed up, ("error", text)
# if it fails, and waits for a shared flag (see new_flag) before it starts.


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
        warm_up(side, name)
        lock = side.lock(name, 10.0)
        events.put(("ready", wid))
        if not wait_flag(start_ns, 120):
            results.put((wid, None, "never started", 0.0))
            return
        start = start_ns.value
        end = start + duration_ns
        delay = (start - now_ns()) / 1e9
        if delay > 0:
            time.sleep(delay)
        cpu0 = _cpu_s()
        if side.is_async:
            rec = side.run(_contend_async(lock, end))
        else:
            rec = array("q")
            acquire, release = lock.acquire, lock.release
            while now_ns() < end:
                t_call = now_ns()
                ok = acquire()
                t_acq = now_ns()
                # the critical section: nothing but the two clock reads
                t_rel = now_ns()
                if not ok:
                    continue  # cannot happen without a timeout; counted as no hold
                release()
                rec.extend((t_call, t_acq, t_rel))
        results.put((wid, rec.tobytes(), None, _cpu_s() - cpu0))
    except BaseException as exc:
        text = _error_text(exc)
        events.put(("error", text))
        results.put((wid, None, text + "\n" + traceback.format_exc(limit=4), 0.0))
    finally:
        if side is not None:
            side.close()


async def _contend_async(lock: Any, end: int) -> array:
    rec = array("q")
    while now_ns() < end:
        t_call = now_ns()
        ok = await lock.acquire()
        t_acq = now_ns()
        t_rel = now_ns()
        if not ok:
            continue
        await lock.release()
        rec.extend((t_call, t_acq, t_rel))
    return rec


def waiter_worker(
    lib: str, url: str, name: str, ttl: float, wid: int, events: Any, go: Any, results: Any
) -> None:
    """Block on the lock once (after ``go``), report when it was acquired, release, exit."""
    side = None
    try:
        side = Side(lib, url)
        warm_up(side, name)
        lock = side.lock(name, ttl)
        events.put(("ready", wid))
        if not wait_flag(go, 120):
            results.put((wid, None, None, "never started"))
            return
        events.put(("calling", wid))
        t_call, t_acq, ok = side.once(lock)
        results.put((wid, t_call, t_acq if ok else None, None if ok else "acquire returned False"))
    except BaseException as exc:
        text = _error_text(exc)
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
        warm_up(side, name)
        lock = side.lock(name, ttl)
        events.put(("ready", -2))
        if not wait_flag(hold, 120):
            return

        def held(t_call: int, t_acq: int, ok: bool) -> None:
            events.put(("held", (t_call, t_acq, ok)))

        side.once(lock, hold=let_go, hold_s=90.0, on_held=held)
        events.put(("released", now_ns()))
    except BaseException as exc:
        events.put(("error", _error_text(exc)))
    finally:
        if side is not None:
            side.close()


# -- process bookkeeping -------------------------------------------------------------------
#
# Signals to children are shared integers without a lock (RawValue), polled by the children:
# multiprocessing.Event.set() waits for every sleeper to acknowledge, so a SIGKILLed child
# blocked in Event.wait() would hang the parent forever.


def new_flag(ctx: Any) -> Any:
    return ctx.RawValue("q", 0)


def wait_flag(flag: Any, timeout: float) -> bool:
    """Poll ``flag`` until non-zero (True) or ``timeout`` seconds (False)."""
    end = time.monotonic() + timeout
    while not flag.value:
        if time.monotonic() >= end:
            return False
        time.sleep(0.005)
    return True


_CHILDREN: list[Any] = []


def start_child(ctx: Any, target: Callable[..., None], *args: Any) -> Any:
    proc = ctx.Process(target=target, args=args, daemon=True)
    proc.start()
    _CHILDREN.append(proc)
    return proc


def reap(procs: list[Any], grace: float = 5.0) -> None:
    """Join; terminate (SIGTERM) then kill (SIGKILL) what is left; always bounded."""
    deadline = time.monotonic() + grace
    for proc in procs:
        proc.join(max(0.0, deadline - time.monotonic()))
    for proc in procs:
        if proc.is_alive():
            proc.terminate()
    for proc in procs:
        proc.join(2.0)
        if proc.is_alive():
            proc.kill()
            proc.join(2.0)
    for proc in procs:
        with contextlib.suppress(ValueError):
            _CHILDREN.remove(proc)
        with contextlib.suppress(Exception):
            proc.close()


def reap_all() -> None:
    reap(list(_CHILDREN), grace=0.5)


def wait_events(events: Any, kind: str, count: int, timeout: float) -> list[Any]:
    """Collect ``count`` events of ``kind`` (others with kind 'error' raise) within timeout."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError(f"only {len(got)}/{count} '{kind}' events within {timeout:g}s")
        try:
            ev, payload = events.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if ev == "error":
            raise RuntimeError(f"child failed: {payload}")
        if ev == kind:
            got.append(payload)
    return got


def collect(results: Any, count: int, timeout: float, procs: list[Any]) -> list[Any]:
    """Collect ``count`` results within timeout; stop early if every process died."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        try:
            got.append(results.get(timeout=0.25))
        except queue.Empty:
            if not any(p.is_alive() for p in procs):
                with contextlib.suppress(queue.Empty):
                    while len(got) < count:
                        got.append(results.get(timeout=0.5))
                break
    return got


# -- statistics ----------------------------------------------------------------------------


def pct(sorted_values: list[float] | list[int], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (nan if empty)."""
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])


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


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Interleaved rounds so that the machine's noise hits every library alike."""
    import redis

    base = redis.Redis.from_url(cfg.url)
    sha = base.script_load(CAD_SCRIPT)
    base.close()

    loop = asyncio.new_event_loop()
    ops: dict[str, tuple[bool, Callable[[], Any]]] = {}
    errors: dict[str, str] = {}
    closers: list[Callable[[], None]] = []

    r = redis.Redis.from_url(cfg.url)
    closers.append(r.close)
    floor_key = f"bench:{run_id}:floor"

    def floor() -> None:
        token = secrets.token_hex(16)
        r.set(floor_key, token, nx=True, px=10000)
        r.evalsha(sha, 1, floor_key, token)

    ops["floor"] = (False, floor)

    ar = loop.run_until_complete(_async_make(cfg.url))
    closers.append(lambda: loop.run_until_complete(ar.aclose()))
    afloor_key = f"bench:{run_id}:afloor"

    async def afloor() -> None:
        token = secrets.token_hex(16)
        await ar.set(afloor_key, token, nx=True, px=10000)
        await ar.evalsha(sha, 1, afloor_key, token)

    ops["floor-async"] = (True, afloor)

    for lib in cfg.libs:
        name = f"bench:{run_id}:solo:{lib}"
        try:
            if lib in ASYNC_LIBS:
                alock = make_async_lock(lib, ar, name, 10.0)

                async def aop(alock: Any = alock) -> None:
                    if not await alock.acquire():
                        raise RuntimeError("uncontended acquire returned False")
                    await alock.release()

                ops[lib] = (True, aop)
            else:
                client = redis.Redis.from_url(cfg.url)
                closers.append(client.close)
                slock = make_sync_lock(lib, client, name, 10.0)

                def sop(slock: Any = slock) -> None:
                    if not slock.acquire():
                        raise RuntimeError("uncontended acquire returned False")
                    slock.release()

                ops[lib] = (False, sop)
        except Exception as exc:
            errors[lib] = _error_text(exc)
    if "redlease" in cfg.libs:
        # Diagnostic, not a default: the same lock without the watchdog (own client, so no
        # renewer thread exists in its runtime). The gap to the default row is the watchdog's.
        try:
            import redlease

            client = redis.Redis.from_url(cfg.url)
            closers.append(client.close)
            dlock = redlease.Lock(client, f"bench:{run_id}:solo:norenew", ttl=10.0, renew=False)

            def dop(dlock: Any = dlock) -> None:
                if not dlock.acquire():
                    raise RuntimeError("uncontended acquire returned False")
                dlock.release()

            ops[DIAG_NORENEW] = (False, dop)
        except Exception as exc:
            errors[DIAG_NORENEW] = _error_text(exc)

    lat: dict[str, list[int]] = {k: [] for k in ops}
    wall: dict[str, int] = {k: 0 for k in ops}

    def batch(key: str, n: int, keep: bool) -> None:
        is_async, fn = ops[key]
        out = lat[key] if keep else []
        pc = time.perf_counter_ns
        if is_async:

            async def go() -> None:
                for _ in range(n):
                    t0 = pc()
                    await fn()
                    out.append(pc() - t0)

            t_start = pc()
            loop.run_until_complete(go())
        else:
            t_start = pc()
            for _ in range(n):
                t0 = pc()
                fn()
                out.append(pc() - t0)
        if keep:
            wall[key] += pc() - t_start

    try:
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
        with contextlib.suppress(Exception):
            pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
            for t in pending:
                t.cancel()
            if pending:
                loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
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
    floor_p50 = out.get("floor", {}).get("p50_us")
    afloor_p50 = out.get("floor-async", {}).get("p50_us")
    for _key, row in out.items():
        if "error" in row:
            continue
        if floor_p50:
            row["ratio_floor"] = row["p50_us"] / floor_p50
        if afloor_p50:
            row["ratio_floor_async"] = row["p50_us"] / afloor_p50
    return out


# -- 2. contended --------------------------------------------------------------------------


def bench_contended(cfg: Config, ctx: Any, lib: str, nproc: int, run_id: str) -> dict[str, Any]:
    name = f"bench:{run_id}:contend:{lib}:{nproc}"
    events, results = ctx.Queue(), ctx.Queue()
    start_ns = new_flag(ctx)  # 0 until the start time is set
    duration_ns = int(cfg.contend_seconds * 1e9)
    import redis

    probe = redis.Redis.from_url(cfg.url)
    server_cpu = float("nan")
    procs = [
        start_child(
            ctx, contend_worker, lib, cfg.url, name, w, events, start_ns, duration_ns, results
        )
        for w in range(nproc)
    ]
    try:
        wait_events(events, "ready", nproc, timeout=60 + 5 * nproc)
        start = now_ns() + int(0.3e9)
        start_ns.value = start
        time.sleep(max(0.0, (start - now_ns()) / 1e9))
        cpu0 = _server_cpu(probe)
        end = start + duration_ns
        time.sleep(max(0.0, (end - now_ns()) / 1e9))
        server_cpu = _server_cpu(probe) - cpu0
        got = collect(results, nproc, timeout=30.0, procs=procs)
    finally:
        if not start_ns.value:
            start_ns.value = now_ns()
        probe.close()
        reap(procs, grace=5.0)
    errors = [e for _, _, e, _ in got if e]
    if len(got) < nproc:
        errors.append(f"{nproc - len(got)} worker(s) did not report within the time limit")
    holds: list[tuple[int, int, int, int]] = []  # (t_acq, t_rel, wid, t_call)
    per_proc: dict[int, int] = {w: 0 for w in range(nproc)}
    client_cpu = sum(cpu for _, _, _, cpu in got)
    for wid, raw, _, _ in got:
        if raw is None:
            continue
        rec = array("q")
        rec.frombytes(raw)
        for i in range(0, len(rec), 3):
            t_call, t_acq, t_rel = rec[i], rec[i + 1], rec[i + 2]
            holds.append((t_acq, t_rel, wid, t_call))
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
    row: dict[str, Any] = {
        "processes": nproc,
        "seconds": cfg.contend_seconds,
        "acquisitions": in_window,
        "acq_per_s": in_window / cfg.contend_seconds,
        "handoffs": len(gaps),
        "handoff_p50_us": pct(gaps, 50) / 1000,
        "handoff_p99_us": pct(gaps, 99) / 1000,
        "same_process_regrab": same / max(1, len(holds) - 1),
        "longest_wait_ms": (waits[-1] / 1e6) if waits else float("nan"),
        "wait_p99_ms": pct(waits, 99) / 1e6,
        "per_process_min": min(per_proc.values()) if per_proc else 0,
        "per_process_max": max(per_proc.values()) if per_proc else 0,
        "per_process": per_proc,
        "client_cpu_us_per_acq": client_cpu / max(1, len(holds)) * 1e6,
        "server_cpu_us_per_acq": server_cpu / max(1, in_window) * 1e6,
        "violations": len(violations),
        "violation_examples": violations[:5],
    }
    if errors:
        row["error"] = "; ".join(e.splitlines()[0] for e in errors[:3])
        row["error_detail"] = errors[:3]
    return row


# -- 3. waiting load -----------------------------------------------------------------------


def bench_waiting(cfg: Config, ctx: Any, lib: str, run_id: str) -> dict[str, Any]:
    import redis

    name = f"bench:{run_id}:wait:{lib}"
    n = cfg.waiters
    events, results = ctx.Queue(), ctx.Queue()
    go, hold, let_go = new_flag(ctx), new_flag(ctx), new_flag(ctx)
    holder = start_child(ctx, holder_worker, lib, cfg.url, name, 10.0, events, hold, let_go)
    waiters = [
        start_child(ctx, waiter_worker, lib, cfg.url, name, 10.0, w, events, go, results)
        for w in range(n)
    ]
    procs = [holder, *waiters]
    probe = redis.Redis.from_url(cfg.url)
    row: dict[str, Any] = {"waiters": n}
    try:
        wait_events(events, "ready", n + 1, timeout=60 + 5 * n)
        hold.value = 1
        _t0_hold, t_held, ok = wait_events(events, "held", 1, timeout=20)[0]
        if not ok:
            raise RuntimeError("the holder could not acquire a free lock")
        go.value = 1
        wait_events(events, "calling", n, timeout=20)
        time.sleep(cfg.wait_settle)
        c0 = int(probe.info("stats")["total_commands_processed"])
        w0 = now_ns()
        time.sleep(cfg.wait_window)
        c1 = int(probe.info("stats")["total_commands_processed"])
        w1 = now_ns()
        commands = c1 - c0 - 1  # minus our first INFO (the second is not counted in c1)
        seconds = (w1 - w0) / 1e9
        row.update(
            window_s=seconds,
            commands=commands,
            per_waiter_per_s=commands / n / seconds,
            window_end_after_hold_s=(w1 - t_held) / 1e9,
        )
        let_go.value = 1
        got = collect(results, n, timeout=30.0 + n * 1.0, procs=waiters)
        late = [e for _, _, _, e in got if e]
        if len(got) < n:
            late.append(f"{n - len(got)} waiter(s) never acquired after the release")
        if late:
            row["after_release_errors"] = late[:3]
    except Exception as exc:
        row["error"] = _error_text(exc)
    finally:
        go.value = 1
        hold.value = 1
        let_go.value = 1
        probe.close()
        reap(procs, grace=5.0)
    return row


# -- 4. crash recovery ---------------------------------------------------------------------


def bench_crash(cfg: Config, ctx: Any, lib: str, run_id: str) -> dict[str, Any]:
    import redis

    ttl = cfg.crash_ttl
    name = f"bench:{run_id}:crash:{lib}"
    events, results = ctx.Queue(), ctx.Queue()
    go, hold, let_go = new_flag(ctx), new_flag(ctx), new_flag(ctx)
    holder = start_child(ctx, holder_worker, lib, cfg.url, name, ttl, events, hold, let_go)
    waiter = start_child(ctx, waiter_worker, lib, cfg.url, name, ttl, -1, events, go, results)
    probe = redis.Redis.from_url(cfg.url)
    row: dict[str, Any] = {"ttl_s": ttl}
    try:
        wait_events(events, "ready", 2, timeout=60)
        hold.value = 1
        _, t_held, ok = wait_events(events, "held", 1, timeout=20)[0]
        if not ok:
            raise RuntimeError("the holder could not acquire a free lock")
        # The waiter joins well into the lease (a "late joiner"): a lock whose waiters time their
        # retry from when they started waiting, not from the lease, shows it here.
        time.sleep(max(0.0, (t_held + int(JOIN_AT * ttl * 1e9) - now_ns()) / 1e9))
        go.value = 1
        wait_events(events, "calling", 1, timeout=20)
        time.sleep(0.3)  # the waiter is blocked (subscribed / polling) by now
        key = lease_key(lib, name)
        a = now_ns()
        pttl = int(probe.pttl(key))
        b = now_ns()
        if pttl < 0:
            raise RuntimeError(f"lease key {key!r} has PTTL {pttl} before the kill")
        lease_end = (a + b) // 2 + pttl * 1_000_000
        t_kill = now_ns()
        os.kill(holder.pid, signal.SIGKILL)
        holder.join(5)
        got = collect(results, 1, timeout=ttl * 4 + 15, procs=[waiter])
        if not got:
            raise TimeoutError(f"the waiter did not acquire within {ttl * 4 + 15:g} s of the kill")
        _, _t_call, t_acq, err = got[0]
        if err:
            raise RuntimeError(err)
        recovery = (t_acq - t_kill) / 1e9
        row.update(
            waiter_joined_after_hold_s=(_t_call - t_held) / 1e9,
            kill_after_hold_s=(t_kill - t_held) / 1e9,
            lease_left_at_kill_s=(lease_end - t_kill) / 1e9,
            kill_to_acquire_s=recovery,
            ratio_ttl=recovery / ttl,
            lease_end_to_acquire_ms=(t_acq - lease_end) / 1e6,
        )
    except Exception as exc:
        row["error"] = _error_text(exc)
    finally:
        go.value = 1
        hold.value = 1
        let_go.value = 1
        probe.close()
        reap([holder, waiter], grace=5.0)
    return row


# -- report --------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def fmt(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:
        return "nan"
    return format(value, spec)


def print_table(headers: list[str], rows: list[list[str]], aligns: str | None = None) -> None:
    full = [r for r in rows if len(r) == len(headers)]
    widths = [max([len(h), *(len(r[i]) for r in full)]) for i, h in enumerate(headers)]
    aligns = aligns or "l" + "r" * (len(headers) - 1)

    def line(cells: list[str]) -> str:
        out = []
        for i, c in enumerate(cells):
            out.append(c.ljust(widths[i]) if aligns[i] == "l" else c.rjust(widths[i]))
        return "  ".join(out).rstrip()

    print(line(headers))
    print(line(["-" * w for w in widths]))
    for r in rows:
        if len(r) != len(headers):  # an error row: name and message
            print(f"{r[0].ljust(widths[0])}  {r[1]}")
        else:
            print(line(r))


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    """Print the tables; returns the list of failed targets."""
    failed: list[str] = []
    env = data["env"]
    print()
    print(
        f"redlease hand-off benchmark  |  server {env['server']}  |  redis-py {env['redis_py']}"
        f" ({'hiredis' if env['hiredis'] else 'python'} parser)  |  Python {env['python']}"
        f"  |  {env['cpus']} CPUs  |  load avg {env['load_before']} -> {env['load_after']}"
    )
    if cfg.quick:
        print("QUICK RUN: small samples, figures are indicative only")

    # 1
    u = data["uncontended"]
    if u:
        failed += _report_uncontended(cfg, u)
    if data["contended"]:
        failed += _report_contended(cfg, data)
    if data["waiting"]:
        failed += _report_waiting(cfg, data)
    if data["crash"]:
        failed += _report_crash(cfg, data)
    print()
    if failed:
        print("Targets missed: " + "; ".join(failed))
    elif not any(lib.startswith("redlease") for lib in cfg.libs):
        print("No redlease target was measured (redlease not among --libs).")
    else:
        print("All targets met.")
    return failed


def _report_uncontended(cfg: Config, u: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    print()
    print(
        f"1. Uncontended acquire+release: {cfg.iters} iterations each after {cfg.warm} warm-up,"
        f" interleaved in {cfg.rounds} rounds"
    )
    rows = []
    labels = {
        "floor": "raw floor: SET NX PX + EVALSHA del",
        "floor-async": "raw floor, redis.asyncio",
        **LIBS,
        DIAG_NORENEW: "  (diagnostic: redlease renew=False)",
    }
    keys = ["floor", "floor-async", *cfg.libs]
    if "redlease" in keys:
        keys.insert(keys.index("redlease") + 1, DIAG_NORENEW)
    for key in keys:
        row = u.get(key)
        if row is None:
            continue
        if "error" in row:
            rows.append([labels[key], f"ERROR: {row['error']}"])
            if key in ("floor", "redlease"):
                failed.append(f"uncontended target not measured ({key} failed)")
            continue
        target = ""
        if key == "redlease":
            ok = row["ratio_floor"] <= TARGET_UNCONTENDED
            target = f"<= {TARGET_UNCONTENDED:.2f}x  {verdict(ok)}"
            if not ok:
                failed.append(f"uncontended redlease p50 {row['ratio_floor']:.2f}x floor")
        extra = ""
        if key in ASYNC_LIBS or key == "floor-async":
            extra = f"{row.get('ratio_floor_async', float('nan')):.2f}x"
        rows.append(
            [
                labels[key],
                fmt(row["ops_per_s"], ",.0f"),
                fmt(row["p50_us"], ".0f"),
                fmt(row["p99_us"], ".0f"),
                f"{row['ratio_floor']:.2f}x",
                extra,
                target,
            ]
        )
    print_table(
        ["library", "ops/s", "p50 us", "p99 us", "p50/floor", "p50/async floor", "target"],
        rows,
        "lrrrrrl",
    )
    return failed


def _report_contended(cfg: Config, data: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    print()
    print(
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
                rows.append([f"{LIBS[lib]}  N={n}", f"ERROR: {row['error']}"])
                if lib in ("redlease", "redlease-async"):
                    failed.append(f"mutual exclusion not checked ({lib} N={n} failed)")
                continue
            excl = "OK" if row["violations"] == 0 else f"VIOLATED x{row['violations']}"
            if row["violations"]:
                loud.append(f"{LIBS[lib]} N={n}: {row['violations']} overlapping holds")
                failed.append(f"mutual exclusion {lib} N={n}")
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
                    excl + (" (worker error)" if "error" in row else ""),
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
            "exclusion",
        ],
        rows,
        "lrrrrrrrrl",
    )
    if loud:
        print()
        print("!" * 78)
        for text in loud:
            print(f"!!! MUTUAL EXCLUSION VIOLATED: {text}")
        print("!" * 78)
    # redlease against the fair peer, same run (informative; redis-py's acq/s is mostly one
    # process re-grabbing its own lock, see same-proc)
    for n in cfg.contend_sizes:
        for mine in ("redlease", "redlease-async"):
            base = data["contended"].get(f"{mine}/{n}", {})
            peer = data["contended"].get(f"python-redis-lock/{n}", {})
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
    return failed


def _report_waiting(cfg: Config, data: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    print()
    print(
        f"3. Waiting load: one holder (10 s lease), {cfg.waiters} waiter processes blocked;"
        f" INFO total_commands_processed delta over ~{cfg.wait_window:g} s"
        " (Lua-internal calls count)"
    )
    rows = []
    for lib in cfg.libs:
        row = data["waiting"].get(lib)
        if row is None:
            continue
        if "error" in row:
            rows.append([LIBS[lib], f"ERROR: {row['error']}"])
            if lib in ("redlease", "redlease-async"):
                failed.append(f"waiting-load target not measured ({lib} failed)")
            continue
        target = ""
        if lib in ("redlease", "redlease-async"):
            ok = row["per_waiter_per_s"] <= TARGET_WAIT_CMDS
            target = f"= 0  {verdict(ok)}"
            if not ok:
                failed.append(f"waiting load {lib} {row['per_waiter_per_s']:.2f}/s/waiter")
        note = ""
        if row.get("window_end_after_hold_s", 0) >= 10.0 / 3:
            note = "window reached the holder's first renewal (ttl/3): it may be counted; "
        if row.get("after_release_errors"):
            note += "after release: " + row["after_release_errors"][0]
        rows.append(
            [
                LIBS[lib],
                str(row["waiters"]),
                fmt(row["window_s"], ".2f"),
                str(row["commands"]),
                fmt(row["per_waiter_per_s"], ".2f"),
                target,
                note,
            ]
        )
    print_table(
        ["library", "waiters", "window s", "commands", "cmds/s/waiter", "target", "note"],
        rows,
        "lrrrrll",
    )
    return failed


def _report_crash(cfg: Config, data: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    print()
    print(
        f"4. Crash recovery: holder (ttl {cfg.crash_ttl:g} s) SIGKILLed while a process waits"
        f" (it started waiting {JOIN_AT * cfg.crash_ttl:g} s into the lease, the kill came"
        f" 0.3 s later); target kill->acquire <= ttl + {TARGET_RECOVERY_SLACK * 1000:.0f} ms"
    )
    rows = []
    limit = 1 + TARGET_RECOVERY_SLACK / cfg.crash_ttl
    for lib in cfg.libs:
        row = data["crash"].get(lib)
        if row is None:
            continue
        if "error" in row:
            rows.append([LIBS[lib], f"ERROR: {row['error']}"])
            if lib in ("redlease", "redlease-async"):
                failed.append(f"crash-recovery target not measured ({lib} failed)")
            continue
        # strict: against the lease actually left at the kill (a renewing library extended it)
        strict = row["kill_to_acquire_s"] / (row["lease_left_at_kill_s"] + TARGET_RECOVERY_SLACK)
        row["ratio_lease_left"] = strict
        target = ""
        if lib in ("redlease", "redlease-async"):
            ok = row["ratio_ttl"] <= limit and strict <= 1.0
            target = f"<= {limit:.3f} and strict <= 1  {verdict(ok)}"
            if not ok:
                failed.append(
                    f"crash recovery {lib} {row['ratio_ttl']:.3f} x ttl, strict {strict:.3f}"
                )
        rows.append(
            [
                LIBS[lib],
                fmt(row["kill_to_acquire_s"] * 1000, ",.0f"),
                fmt(row["ratio_ttl"], ".3f"),
                fmt(row["lease_left_at_kill_s"] * 1000, ",.0f"),
                fmt(row["lease_end_to_acquire_ms"], ",.1f"),
                fmt(strict, ".3f"),
                target,
            ]
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
    return failed


# -- main ----------------------------------------------------------------------------------


def _delete_keys(url: str, run_id: str) -> None:
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
        "--sections",
        default="1,2,3,4",
        help="comma-separated subset of the sections 1,2,3,4 to run",
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

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt  # run the clean-up below: children reaped, server stopped

    signal.signal(signal.SIGTERM, on_term)
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

    import redis

    run_id = secrets.token_hex(4)
    probe = redis.Redis.from_url(url)
    info = probe.info("server")
    probe.close()
    data: dict[str, Any] = {
        "env": {
            "server": f"{'valkey' if 'valkey_version' in info else 'redis'} "
            f"{info.get('valkey_version') or info.get('redis_version')}",
            "redis_py": redis.__version__,
            "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_before": " ".join(f"{x:.2f}" for x in os.getloadavg()),
            "url": url,
            "quick": cfg.quick,
        },
        "uncontended": {},
        "contended": {},
        "waiting": {},
        "crash": {},
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
        if "1" in sections:
            progress("uncontended")
            try:
                data["uncontended"] = bench_uncontended(cfg, run_id)
            except Exception as exc:
                data["uncontended"] = {"floor": {"error": _error_text(exc)}}
        if "2" in sections:
            for n in cfg.contend_sizes:
                for lib in libs:
                    guarded(
                        data["contended"],
                        f"{lib}/{n}",
                        lambda lib=lib, n=n: bench_contended(cfg, ctx, lib, n, run_id),
                    )
        if "3" in sections:
            for lib in libs:
                guarded(data["waiting"], lib, lambda lib=lib: bench_waiting(cfg, ctx, lib, run_id))
        if "4" in sections:
            for lib in libs:
                guarded(data["crash"], lib, lambda lib=lib: bench_crash(cfg, ctx, lib, run_id))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        reap_all()
        if server is not None:
            server.stop()
        else:
            _delete_keys(url, run_id)
        data["env"]["load_after"] = " ".join(f"{x:.2f}" for x in os.getloadavg())
        data["env"]["elapsed_s"] = time.monotonic() - t_begin
    progress("done")
    failed = report(cfg, data)
    data["failed_targets"] = failed
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(data, fh, indent=1, default=str)
        print(f"raw figures written to {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
