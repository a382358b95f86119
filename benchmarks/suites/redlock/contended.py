"""Section 2: 16 processes on one lock over N servers, started at one instant, looping
acquire -> tiny critical section -> release; failed attempts are retried and counted."""

from __future__ import annotations

import asyncio
import time
import traceback
from array import array
from typing import Any

from harness.contention import (
    add_errors,
    cpu_figures,
    decode_holds,
    exclusion_figures,
    handoff_figures,
    held_share,
    per_process_counts,
    spread_figures,
    throughput_figures,
    wait_figures,
    worker_errors,
)
from harness.cpu import cpu_s, server_cpu
from harness.report import error_text
from harness.servers import calls, commands_processed
from harness.spawn import now_ns, run_contenders, wait_for_start

from suites.redlock.config import Config
from suites.redlock.libs import MINE, Proc
from suites.redlock.trace import Trace, why_figures


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
        cpu += server_cpu(probe)
        stats = probe.info("commandstats")
        scripts += sum(calls(stats, c) for c in ("evalsha", "eval"))
        messages += calls(stats, "publish")
        commands += commands_processed(probe)
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
        "held_share": held_share(holds, window.start, window.end),
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
