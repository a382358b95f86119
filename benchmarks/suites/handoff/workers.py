"""The child processes of the hand-off benchmark: contenders looping on one lock (section 2),
and a holder with waiters on one lock (sections 3 and 4), driven by shared flags."""

from __future__ import annotations

import traceback
from array import array
from typing import Any

from harness.cpu import cpu_s
from harness.report import error_text
from harness.spawn import (
    collect,
    new_flag,
    now_ns,
    reap,
    start_child,
    wait_events,
    wait_flag,
    wait_for_start,
)

from suites.handoff.libs import Side


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

    def hand_over(self) -> list[str]:
        """Let the holder release; what went wrong (at most three lines) while every waiter
        took the lock in turn."""
        n = len(self.waiters)
        self.let_go.value = 1
        got = collect(self.results, n, timeout=30.0 + n * 1.0, procs=self.waiters)
        late = [e for _, _, _, e in got if e]
        if len(got) < n:
            late.append(f"{n - len(got)} waiter(s) never acquired after the release")
        return late[:3]

    def stop(self) -> None:
        """Release every flag and reap every child (bounded)."""
        self.go.value = 1
        self.hold.value = 1
        self.let_go.value = 1
        reap([self.holder, *self.waiters], grace=5.0)
