"""Child processes: started with a shared flag or start instant, every wait bounded, every
child reaped (SIGTERM, then SIGKILL).

A child reports ``("ready", id)`` on an ``events`` queue once connected and warmed up, or
``("error", text)`` if it fails, and waits for a shared flag (see :func:`new_flag`) before
it starts.

Signals to children are shared integers without a lock (RawValue), polled by the children:
``multiprocessing.Event.set()`` waits for every sleeper to acknowledge, so a SIGKILLed child
blocked in ``Event.wait()`` would hang the parent forever.
"""

from __future__ import annotations

import contextlib
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def now_ns() -> int:
    """The system-wide monotonic clock: comparable across processes on this machine."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


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
    """Reap every child :func:`start_child` started and nobody reaped yet."""
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


# -- a window of contention ------------------------------------------------------------------
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
