"""Section 3: one holder and blocked waiters on the cluster: the commands every node processed
over a window, minus a baseline window with the lock held and no waiter."""

from __future__ import annotations

import time
from typing import Any

from harness.report import error_text
from harness.servers import command_calls
from harness.spawn import now_ns

from suites.cluster.config import NOT_COUNTED, WAIT_TTL, Config
from suites.handoff.workers import HeldLock


def _delta(before: dict[str, int], after: dict[str, int]) -> tuple[dict[str, int], dict[str, int]]:
    """The commands processed between two readings: (counted, not counted), by name."""
    counted: dict[str, int] = {}
    skipped: dict[str, int] = {}
    for name, calls in after.items():
        diff = calls - before.get(name, 0)
        if diff <= 0:
            continue
        target = skipped if name.split("|")[0] in NOT_COUNTED else counted
        target[name] = diff
    return counted, skipped


def _window(probes: list[Any], seconds: float) -> tuple[dict[str, int], dict[str, int], float]:
    c0 = command_calls(probes)
    t0 = now_ns()
    time.sleep(seconds)
    c1 = command_calls(probes)
    t1 = now_ns()
    counted, skipped = _delta(c0, c1)
    return counted, skipped, (t1 - t0) / 1e9


def bench_waiting(cfg: Config, ctx: Any, url: str, ports: list[int], run_id: str) -> dict[str, Any]:
    """One holder, ``cfg.waiters`` waiter processes: a baseline window with the lock held and no
    waiter, then the same window with every waiter blocked; commands counted on every node."""
    import redis

    from redlease.server import HOST

    n = cfg.waiters
    name = f"bench:{run_id}:wait"
    held = HeldLock(ctx, "redlease", url, name, WAIT_TTL, list(range(n)))
    probes = [redis.Redis(host=HOST, port=port) for port in ports]
    row: dict[str, Any] = {"waiters": n, "nodes": len(ports), "ttl_s": WAIT_TTL}
    try:
        t_held = held.take(ready_timeout=60 + 5 * n)
        time.sleep(cfg.wait_settle)
        base, base_skipped, base_s = _window(probes, cfg.wait_window)
        held.start_waiting()
        time.sleep(cfg.wait_settle)  # every waiter is queued and subscribed by now
        counted, skipped, seconds = _window(probes, cfg.wait_window)
        end_after_hold = (now_ns() - t_held) / 1e9
        commands, baseline = sum(counted.values()), sum(base.values())
        extra = commands - baseline * seconds / base_s
        row.update(
            window_s=seconds,
            commands=commands,
            counted=counted,
            not_counted=skipped,
            baseline_window_s=base_s,
            baseline_commands=baseline,
            baseline_counted=base,
            baseline_not_counted=base_skipped,
            per_waiter_per_s=max(0.0, extra) / n / seconds,
            window_end_after_hold_s=end_after_hold,
        )
        late = held.hand_over()
        if late:
            row["after_release_errors"] = late
    except Exception as exc:
        row["error"] = error_text(exc)
    finally:
        for probe in probes:
            probe.close()
        held.stop()
    return row
