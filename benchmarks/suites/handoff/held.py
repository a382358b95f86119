"""Sections 3 and 4: a lock held by one process while others wait on it: the commands the
blocked waiters send (3), and how soon a waiter has the lock once the holder is killed (4)."""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from harness.report import error_text
from harness.servers import commands_processed
from harness.spawn import collect, now_ns

from suites.handoff.config import JOIN_AT, Config
from suites.handoff.libs import lease_key
from suites.handoff.workers import HeldLock


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
        c0 = commands_processed(probe)
        w0 = now_ns()
        time.sleep(cfg.wait_window)
        c1 = commands_processed(probe)
        w1 = now_ns()
        commands = c1 - c0 - 1  # minus our first INFO (the second is not counted in c1)
        seconds = (w1 - w0) / 1e9
        row.update(
            window_s=seconds,
            commands=commands,
            per_waiter_per_s=commands / n / seconds,
            window_end_after_hold_s=(w1 - t_held) / 1e9,
        )
        late = held.hand_over()
        if late:
            row["after_release_errors"] = late
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
