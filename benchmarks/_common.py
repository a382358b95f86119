"""What ``handoff.py`` and ``redlock.py`` share: the clock, child-process plumbing, the
interleaved latency loop, the figures of a contended run, the table printer and the run's
bookkeeping (progress lines, server description, JSON output).

The scripts are run as ``python benchmarks/<name>.py``, so this directory is on ``sys.path``
(in their spawned children too) and they import this module as ``_common``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import queue
import signal
import sys
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

# -- clock, CPU, errors ----------------------------------------------------------------------


def now_ns() -> int:
    """The system-wide monotonic clock: comparable across processes on this machine."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def cpu_s() -> float:
    """CPU seconds (user + system) of this whole process, all threads."""
    t = os.times()
    return t.user + t.system


def error_text(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def close_loop(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel the tasks still pending (waiting at most 5 s for them), then close the loop."""
    with contextlib.suppress(Exception):
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(
                asyncio.wait_for(asyncio.gather(*pending, return_exceptions=True), 5)
            )
    loop.close()


# -- child processes -------------------------------------------------------------------------
#
# Every child reports ("ready", id) on `events` once connected and warmed up, ("error", text)
# if it fails, and waits for a shared flag (see new_flag) before it starts.
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


# -- statistics ------------------------------------------------------------------------------


def pct(sorted_values: list[float] | list[int], q: float) -> float:
    """Nearest-rank percentile of an already sorted list (nan if empty)."""
    if not sorted_values:
        return float("nan")
    k = min(len(sorted_values) - 1, max(0, math.ceil(q / 100 * len(sorted_values)) - 1))
    return float(sorted_values[k])


# -- warm-up ---------------------------------------------------------------------------------


def wait_once(holder: Any, waiter: Any, loop: asyncio.AbstractEventLoop | None) -> bool:
    """Warm up a library's waiting path: ``holder`` takes a lock and keeps it 30 ms while
    ``waiter`` (another handle on the same name, in this process) blocks on it; both release.

    What a library sets up the first time a process waits (a pub/sub subscription, a pooled
    connection for a blocking pop) is then set up before the measured window, as in any
    process that has run for a while, and is not counted in its figures. Returns whether the
    waiter got the lock.
    """
    if loop is not None:
        return loop.run_until_complete(_wait_once_async(holder, waiter))
    import threading

    taken = threading.Event()

    def hold() -> None:
        if holder.acquire():
            taken.set()
            time.sleep(0.03)
            holder.release()
        taken.set()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    taken.wait(10)
    ok = bool(waiter.acquire())
    if ok:
        waiter.release()
    thread.join(10)
    return ok


async def _wait_once_async(holder: Any, waiter: Any) -> bool:
    taken = asyncio.Event()

    async def hold() -> None:
        try:
            if await holder.acquire():
                taken.set()
                await asyncio.sleep(0.03)
                await holder.release()
        finally:
            taken.set()

    task = asyncio.ensure_future(hold())
    await asyncio.wait_for(taken.wait(), 10)
    ok = bool(await waiter.acquire())
    if ok:
        await waiter.release()
    await task
    return ok


# -- section 1: uncontended, interleaved -----------------------------------------------------

# The raw floor's release: compare-and-delete, as every lease lock does it.
CAD_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)

Op = tuple[bool, Callable[[], Any]]  # (is it a coroutine function, one acquire+release)


def acquire_release(lock: Any, is_async: bool, failure: str) -> Op:
    """One acquire+release of ``lock`` as a timed operation; RuntimeError(failure) if the
    acquire of the free lock returns False."""
    if is_async:

        async def aop() -> None:
            if not await lock.acquire():
                raise RuntimeError(failure)
            await lock.release()

        return True, aop

    def sop() -> None:
        if not lock.acquire():
            raise RuntimeError(failure)
        lock.release()

    return False, sop


async def _timed_awaits(
    fn: Callable[[], Any], count: int, out: list[int], timeout: float | None
) -> None:
    pc = time.perf_counter_ns
    if timeout is None:
        for _ in range(count):
            t0 = pc()
            await fn()
            out.append(pc() - t0)
    else:
        for _ in range(count):
            t0 = pc()
            await asyncio.wait_for(fn(), timeout)
            out.append(pc() - t0)


def _timed_calls(
    loop: asyncio.AbstractEventLoop, op: Op, count: int, out: list[int], timeout: float | None
) -> int:
    """Run ``op`` ``count`` times, appending each call's ns to ``out``; all of them took (ns)."""
    is_async, fn = op
    pc = time.perf_counter_ns
    if is_async:
        t_start = pc()
        loop.run_until_complete(_timed_awaits(fn, count, out, timeout))
        return pc() - t_start
    t_start = pc()
    for _ in range(count):
        t0 = pc()
        fn()
        out.append(pc() - t0)
    return pc() - t_start


def time_interleaved(
    loop: asyncio.AbstractEventLoop,
    ops: dict[str, Op],
    errors: dict[str, str],
    warm: int,
    iters: int,
    rounds: int,
    async_timeout: float | None = None,
) -> tuple[dict[str, list[int]], dict[str, int]]:
    """Warm every op up, then time ``iters`` calls of each in ``rounds`` rounds, rotating the
    order every round so that bursts of load on the machine hit every op alike.

    An op that raises is dropped from ``ops`` and its error kept in ``errors``. Returns the
    latencies (ns) and the wall time spent in timed calls (ns), per op.
    """
    lat: dict[str, list[int]] = {k: [] for k in ops}
    wall: dict[str, int] = {k: 0 for k in ops}
    for key in list(ops):
        try:
            _timed_calls(loop, ops[key], warm, [], async_timeout)
        except Exception as exc:
            errors[key] = error_text(exc)
            del ops[key]
    per_round = max(1, iters // rounds)
    keys = list(ops)
    for rnd in range(rounds):
        order = keys[rnd % len(keys) :] + keys[: rnd % len(keys)]
        for key in order:
            if key not in ops:
                continue
            try:
                wall[key] += _timed_calls(loop, ops[key], per_round, lat[key], async_timeout)
            except Exception as exc:
                errors[key] = error_text(exc)
                del ops[key]
    return lat, wall


def latency_figures(values: list[int], wall_ns: int) -> dict[str, Any]:
    """ops/s and latency percentiles (us) of ``values`` (ns, sorted here)."""
    values.sort()
    return {
        "n": len(values),
        "ops_per_s": len(values) / (wall_ns / 1e9),
        "p50_us": pct(values, 50) / 1000,
        "p99_us": pct(values, 99) / 1000,
        "mean_us": sum(values) / len(values) / 1000,
        "samples_ns": values,
    }


def latency_rows(
    lat: dict[str, list[int]], wall: dict[str, int], errors: dict[str, str]
) -> dict[str, Any]:
    """The figures of every op that ran, then an ``{"error": ...}`` row for every op that failed."""
    out: dict[str, Any] = {}
    for key, values in lat.items():
        if key in errors or not values:
            continue
        out[key] = latency_figures(values, wall[key])
    for key, err in errors.items():
        out[key] = {"error": err}
    return out


# -- section 2: contended --------------------------------------------------------------------
#
# A contend worker is called as worker(*head, wid, events, start_ns, duration_ns, results),
# reports ("ready", wid), and puts one tuple on `results`: (wid, raw, error, cpu_s, ...), where
# raw is the bytes of an array("q") of (t_first_call, t_acq, t_rel) triples, one per hold.


def wait_for_start(start_ns: Any, duration_ns: int) -> int | None:
    """In a worker: wait for the shared start time and sleep until it; the end of the window
    (None if the parent never set a start)."""
    if not wait_flag(start_ns, 120):
        return None
    start = start_ns.value
    end = start + duration_ns
    delay = (start - now_ns()) / 1e9
    if delay > 0:
        time.sleep(delay)
    return end


@dataclass
class Window:
    """One contended run as the parent saw it."""

    start: int  # ns, system-wide monotonic
    end: int
    before: Any  # read_counters() at the start and at the end of the window
    after: Any
    reports: list[Any]  # the workers' results tuples, as many as reported in time


def run_contenders(
    ctx: Any,
    worker: Callable[..., None],
    head: tuple[Any, ...],
    nproc: int,
    seconds: float,
    read_counters: Callable[[], Any],
) -> Window:
    """Start ``nproc`` workers, start them all at one instant once all are ready, read the
    servers' counters at both ends of the window, collect the reports, reap the workers."""
    events, results = ctx.Queue(), ctx.Queue()
    start_ns = new_flag(ctx)  # 0 until the start time is set
    duration_ns = int(seconds * 1e9)
    procs = [
        start_child(ctx, worker, *head, w, events, start_ns, duration_ns, results)
        for w in range(nproc)
    ]
    try:
        wait_events(events, "ready", nproc, timeout=60 + 5 * nproc)
        start = now_ns() + int(0.3e9)
        start_ns.value = start
        time.sleep(max(0.0, (start - now_ns()) / 1e9))
        before = read_counters()
        end = start + duration_ns
        time.sleep(max(0.0, (end - now_ns()) / 1e9))
        after = read_counters()
        got = collect(results, nproc, timeout=30.0, procs=procs)
    finally:
        if not start_ns.value:
            start_ns.value = now_ns()
        reap(procs, grace=5.0)
    return Window(start, end, before, after, got)


Hold = tuple[int, int, int, int]  # (t_acq, t_rel, wid, t_first_call)


def worker_errors(reports: list[Any], nproc: int) -> list[str]:
    """The workers' error texts, and one for the workers that did not report."""
    errors = [e for _, _, e, *_ in reports if e]
    if len(reports) < nproc:
        errors.append(f"{nproc - len(reports)} worker(s) did not report within the time limit")
    return errors


def decode_holds(reports: list[Any]) -> list[Hold]:
    """Every recorded hold of every worker, sorted by acquire time."""
    holds: list[Hold] = []
    for wid, raw, *_ in reports:
        if raw is None:
            continue
        rec = array("q")
        rec.frombytes(raw)
        for i in range(0, len(rec), 3):
            t_first, t_acq, t_rel = rec[i], rec[i + 1], rec[i + 2]
            holds.append((t_acq, t_rel, wid, t_first))
    holds.sort()
    return holds


def per_process_counts(holds: list[Hold], nproc: int, start: int, end: int) -> dict[int, int]:
    """Acquisitions inside the window, per worker (every worker listed)."""
    per_proc: dict[int, int] = {w: 0 for w in range(nproc)}
    for t_acq, _, wid, _ in holds:
        if start <= t_acq < end:
            per_proc[wid] += 1
    return per_proc


def throughput_figures(per_proc: dict[int, int], seconds: float) -> dict[str, Any]:
    in_window = sum(per_proc.values())
    return {"acquisitions": in_window, "acq_per_s": in_window / seconds}


def handoff_figures(holds: list[Hold]) -> dict[str, Any]:
    """Hand-off: next acquire - previous release between holds of different processes;
    same-proc: the share of consecutive holds by one process."""
    gaps: list[int] = []
    same = 0
    for prev, (t_acq, _, wid, _) in pairwise(holds):
        if prev[2] != wid:
            gaps.append(t_acq - prev[1])
        else:
            same += 1
    gaps.sort()
    return {
        "handoffs": len(gaps),
        "handoff_p50_us": pct(gaps, 50) / 1000,
        "handoff_p99_us": pct(gaps, 99) / 1000,
        "same_process_regrab": same / max(1, len(holds) - 1),
    }


def wait_figures(holds: list[Hold]) -> dict[str, Any]:
    """How long acquire() calls waited (first call -> acquired)."""
    waits = sorted(h[0] - h[3] for h in holds)
    return {
        "longest_wait_ms": (waits[-1] / 1e6) if waits else float("nan"),
        "wait_p99_ms": pct(waits, 99) / 1e6,
    }


def spread_figures(per_proc: dict[int, int]) -> dict[str, Any]:
    return {
        "per_process_min": min(per_proc.values()) if per_proc else 0,
        "per_process_max": max(per_proc.values()) if per_proc else 0,
    }


def cpu_figures(
    client_cpu: float, server_cpu: float, holds: list[Hold], acquisitions: int
) -> dict[str, Any]:
    """Workers' CPU per recorded hold and the server's CPU per acquisition in the window."""
    return {
        "client_cpu_us_per_acq": client_cpu / max(1, len(holds)) * 1e6,
        "server_cpu_us_per_acq": server_cpu / max(1, acquisitions) * 1e6,
    }


def exclusion_figures(holds: list[Hold]) -> dict[str, Any]:
    """Holds that began before an earlier one ended: mutual-exclusion failures."""
    violations = []
    max_rel, max_rel_wid = None, None
    for i, (t_acq, t_rel, wid, _) in enumerate(holds):
        if max_rel is not None and t_acq < max_rel:
            violations.append(
                {"index": i, "overlap_ns": max_rel - t_acq, "holders": [max_rel_wid, wid]}
            )
        if max_rel is None or t_rel > max_rel:
            max_rel, max_rel_wid = t_rel, wid
    return {"violations": len(violations), "violation_examples": violations[:5]}


def add_errors(row: dict[str, Any], errors: list[str]) -> dict[str, Any]:
    """The first line of the first three errors as the row's error, if any."""
    if errors:
        row["error"] = "; ".join(e.splitlines()[0] for e in errors[:3])
        row["error_detail"] = errors[:3]
    return row


# -- report ----------------------------------------------------------------------------------


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


def print_section(title: str) -> None:
    print()
    print(title)


def print_header(title: str, quick: bool) -> None:
    print_section(title)
    if quick:
        print("QUICK RUN: small samples, figures are indicative only")


def error_row(label: str, row: dict[str, Any]) -> list[str]:
    return [label, f"ERROR: {row['error']}"]


def exclusion_verdict(
    row: dict[str, Any], label: str, key: str, loud: list[str], failed: list[str]
) -> str:
    """A contended row's exclusion cell; overlapping holds also go to the banner (``loud``,
    under ``label``) and to the failed targets (under ``key``)."""
    if row["violations"]:
        loud.append(f"{label}: {row['violations']} overlapping holds")
        failed.append(f"mutual exclusion {key}")
    excl = "OK" if row["violations"] == 0 else f"VIOLATED x{row['violations']}"
    return excl + (" (worker error)" if "error" in row else "")


def print_violations(loud: list[str]) -> None:
    """A banner naming every mutual-exclusion failure (nothing if there is none)."""
    if loud:
        print()
        print("!" * 78)
        for text in loud:
            print(f"!!! MUTUAL EXCLUSION VIOLATED: {text}")
        print("!" * 78)


# -- the run ---------------------------------------------------------------------------------


def pick_libs(text: str, known: dict[str, str]) -> list[str] | None:
    """The comma-separated libraries of ``--libs``; None (and a message) if one is unknown."""
    libs = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in libs if x not in known]
    if unknown:
        print(f"unknown libraries: {unknown}; choose from {list(known)}", file=sys.stderr)
        return None
    return libs


def interrupt_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt: the clean-up runs (children reaped, servers stopped)."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


class Progress:
    """Progress lines on stderr, timed from the start of the run."""

    def __init__(self) -> None:
        self.t_begin = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t_begin

    def __call__(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {text}", file=sys.stderr, flush=True)

    def guarded(self, section: dict[str, Any], key: str, fn: Callable[[], dict[str, Any]]) -> None:
        """``section[key] = fn()``, or an ``{"error": ...}`` row if it raises."""
        self(key)
        try:
            section[key] = fn()
        except Exception as exc:
            section[key] = {"error": error_text(exc)}

    def uncontended(self, data: dict[str, Any], bench: Callable[[], Any], error_key: str) -> None:
        """Section 1 as a whole: its rows, or one error row under ``error_key`` if it fails."""
        self("uncontended")
        try:
            data["uncontended"] = bench()
        except Exception as exc:
            data["uncontended"] = {error_key: {"error": error_text(exc)}}

    def per_size(
        self,
        section: dict[str, Any],
        sizes: tuple[int, ...],
        libs: list[str],
        bench: Callable[[str, int], dict[str, Any]],
    ) -> None:
        """``section[f"{lib}/{n}"] = bench(lib, n)`` for every size, every library (guarded)."""
        for n in sizes:
            for lib in libs:
                self.guarded(section, f"{lib}/{n}", lambda lib=lib, n=n: bench(lib, n))

    def per_library(
        self, section: dict[str, Any], libs: list[str], bench: Callable[[str], dict[str, Any]]
    ) -> None:
        """``section[lib] = bench(lib)`` for every library (guarded)."""
        for lib in libs:
            self.guarded(section, lib, lambda lib=lib: bench(lib))


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def server_name(info: dict[str, Any]) -> str:
    """``redis 7.0.15`` or ``valkey 8.0.1``, from INFO server."""
    return (
        f"{'valkey' if 'valkey_version' in info else 'redis'}"
        f" {info.get('valkey_version') or info.get('redis_version')}"
    )


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


def write_json(path: str, data: dict[str, Any]) -> None:
    with open(path, "w") as fh:
        json.dump(data, fh, indent=1, default=str)
    print(f"raw figures written to {path}")
