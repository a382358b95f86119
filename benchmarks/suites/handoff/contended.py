"""Section 2: N processes on one lock, all started at one instant, looping acquire -> tiny
critical section -> release; the figures of the window and the servers' counters."""

from __future__ import annotations

from typing import Any

from harness.contention import (
    add_errors,
    cpu_figures,
    decode_holds,
    exclusion_figures,
    handoff_figures,
    per_process_counts,
    spread_figures,
    throughput_figures,
    wait_figures,
    worker_errors,
)
from harness.spawn import run_contenders

from suites.handoff.config import Config
from suites.handoff.libs import COUNTED, server_counters, server_probes
from suites.handoff.workers import contend_worker


def bench_contended(cfg: Config, ctx: Any, lib: str, nproc: int, run_id: str) -> dict[str, Any]:
    name = f"bench:{run_id}:contend:{lib}:{nproc}"
    probes = server_probes(cfg.url)
    try:
        window = run_contenders(
            ctx,
            contend_worker,
            (lib, cfg.url, name),
            nproc,
            cfg.contend_seconds,
            lambda: [server_counters(probe) for probe in probes],
        )
    finally:
        for probe in probes:
            probe.close()
    holds = decode_holds(window.reports)
    per_proc = per_process_counts(holds, nproc, window.start, window.end)
    throughput = throughput_figures(per_proc, cfg.contend_seconds)
    client_cpu = sum(r[3] for r in window.reports)
    ends = list(zip(window.before, window.after, strict=True))
    server_cpu = sum(after[0] - before[0] for before, after in ends)
    calls = {
        label: sum(after[1][label] - before[1][label] for before, after in ends)
        for label in sorted(set(COUNTED.values()))
    }
    row: dict[str, Any] = {
        "processes": nproc,
        "seconds": cfg.contend_seconds,
        **throughput,
        **handoff_figures(holds),
        **wait_figures(holds),
        **spread_figures(per_proc),
        "per_process": per_proc,
        **cpu_figures(client_cpu, server_cpu, holds, throughput["acquisitions"]),
        **exclusion_figures(holds),
        **{
            f"{label}_per_acq": n / max(1, throughput["acquisitions"]) for label, n in calls.items()
        },
    }
    return add_errors(row, worker_errors(window.reports, nproc))
