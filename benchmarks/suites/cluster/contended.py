"""Section 2: N processes on one lock (the hand-off benchmark's contended run), on the server
and on the cluster, alternated, repeated and merged: cluster / server."""

from __future__ import annotations

from typing import Any

from harness.report import error_text
from harness.run import Progress

from suites.cluster.config import TOPOS, Config
from suites.handoff import config as handoff_config
from suites.handoff import contended as handoff_contended


def bench_contended(
    cfg: Config, ctx: Any, url: str, lib: str, nproc: int, run_id: str
) -> dict[str, Any]:
    """handoff.py's contended run (its workers and figures) against ``url``."""
    hcfg = handoff_config.Config(
        url, cfg.quick, [lib], 0, 0, 1, (nproc,), cfg.contend_seconds, 0, 0.0, 0.0, 0.0
    )
    return handoff_contended.bench_contended(hcfg, ctx, lib, nproc, run_id)


def merge_runs(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Repeated runs of one configuration as one row: rates and p50s averaged, the longest
    wait and the per-process spread over all runs, violations summed."""
    good = [r for r in runs if r.get("acquisitions")]
    if not good:
        return runs[0] if len(runs) == 1 else {"error": "; ".join(r["error"] for r in runs)}

    def mean(key: str) -> float | None:
        values = [r[key] for r in good if r.get(key) is not None]
        return sum(values) / len(values) if values else None

    row: dict[str, Any] = {
        "runs": len(runs),
        "processes": good[0]["processes"],
        "acquisitions": sum(r["acquisitions"] for r in good),
        "violations": sum(r["violations"] for r in good),
        "violation_examples": [v for r in good for v in r["violation_examples"]][:5],
        "longest_wait_ms": max(r["longest_wait_ms"] for r in good),
        "per_process_min": min(r["per_process_min"] for r in good),
        "per_process_max": max(r["per_process_max"] for r in good),
        "per_run": [{k: v for k, v in r.items() if k != "per_process"} for r in runs],
    }
    for key in (
        "acq_per_s",
        "handoff_p50_us",
        "handoff_p99_us",
        "same_process_regrab",
        "wait_p99_ms",
        "client_cpu_us_per_acq",
        "server_cpu_us_per_acq",
    ):
        row[key] = mean(key)
    errors = [r["error"] for r in runs if "error" in r]
    if errors:
        row["error"] = "; ".join(errors[:3])
    return row


def bench_all_contended(
    cfg: Config, ctx: Any, urls: dict[str, str], run_id: str, progress: Progress
) -> dict[str, Any]:
    """Every (size, library) on both topologies, ``cfg.repeats`` times, the order of the two
    topologies swapped at every repeat so that a drift of the machine's load hits both alike."""
    runs: dict[str, list[dict[str, Any]]] = {}
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            for rep in range(cfg.repeats):
                for topo in TOPOS if rep % 2 == 0 else TOPOS[::-1]:
                    key = f"{topo}/{lib}/{n}"
                    progress(f"{key} (run {rep + 1}/{cfg.repeats})")
                    try:
                        row = bench_contended(
                            cfg, ctx, urls[topo], lib, n, f"{run_id}:{topo}:{rep}"
                        )
                    except Exception as exc:
                        row = {"error": error_text(exc)}
                    runs.setdefault(key, []).append(row)
    out = {key: merge_runs(rows) for key, rows in runs.items()}
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            srv, clu = out.get(f"server/{lib}/{n}", {}), out.get(f"cluster/{lib}/{n}", {})
            if srv.get("acq_per_s") and clu.get("acq_per_s"):
                clu["ratio_acq_per_s"] = clu["acq_per_s"] / srv["acq_per_s"]
            if srv.get("handoff_p50_us") and clu.get("handoff_p50_us"):
                clu["ratio_handoff_p50"] = clu["handoff_p50_us"] / srv["handoff_p50_us"]
            if srv.get("longest_wait_ms") and clu.get("longest_wait_ms"):
                clu["ratio_longest_wait"] = clu["longest_wait_ms"] / srv["longest_wait_ms"]
    return out
