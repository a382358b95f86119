"""The figures of a contended run, from the holds the workers recorded: throughput, hand-off
between processes, waits, per-process spread, CPU per acquisition and mutual exclusion."""

from __future__ import annotations

from array import array
from itertools import pairwise
from typing import Any

from harness.timing import pct

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


def held_share(holds: list[Hold], start: int, end: int) -> float:
    """The share of the window during which someone held the lock."""
    busy = sum(
        min(t_rel, end) - max(t_acq, start)
        for t_acq, t_rel, _, _ in holds
        if t_acq < end and t_rel > start
    )
    return busy / max(1, end - start)


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
