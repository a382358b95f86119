"""Section 3: two of five servers paused (SIGSTOP): does each library still acquire, and how
fast (one child process, a bounded time per library)."""

from __future__ import annotations

import contextlib
import queue
import time
from typing import Any

from harness.report import error_text
from harness.spawn import new_flag, now_ns, reap, start_child, wait_events, wait_flag
from harness.timing import pct

from suites.redlock.config import Config
from suites.redlock.libs import Proc


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
