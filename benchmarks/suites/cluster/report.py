"""The cluster benchmark's tables, one per section, and its targets (cluster / one server)."""

from __future__ import annotations

from typing import Any

from harness.report import (
    error_row,
    exclusion_verdict,
    fmt,
    print_header,
    print_section,
    print_table,
    print_violations,
    verdict,
)

from suites.cluster.config import (
    DIRECT_SUFFIX,
    KINDS,
    LIBS,
    NOT_COUNTED,
    TARGET_N,
    TARGET_RATIO,
    TARGET_WAIT_CMDS,
    TOPOS,
    WAIT_TTL,
    Config,
)


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    """Print the tables and the targets; returns the targets missed."""
    failed: list[str] = []
    env = data["env"]
    print_header(
        f"redlease cluster benchmark  |  server {env['server']}  |  cluster {env['cluster']}"
        f" ({env['cluster_nodes']} nodes: 3 masters + 3 replicas, started in"
        f" {env['cluster_startup_s']:.1f} s)  |  redis-py {env['redis_py']}"
        f" ({'hiredis' if env['hiredis'] else 'python'} parser)  |  Python {env['python']}"
        f"  |  {env['cpus']} CPUs  |  load avg {env['load_before']} -> {env['load_after']}",
        cfg.quick,
    )
    targets: list[str] = data["targets"]
    if data["uncontended"]:
        _report_uncontended(cfg, data["uncontended"], targets, failed)
    if data["contended"]:
        _report_contended(cfg, data["contended"], targets, failed)
    if data["waiting"]:
        _report_waiting(cfg, data["waiting"], targets, failed)
    print()
    print("Targets (ratios: cluster / one server, same run):")
    for line in targets:
        print(f"  {line}")
    print()
    print("Targets missed: " + "; ".join(failed) if failed else "All targets met.")
    return failed


def _target(targets: list[str], text: str, ok: bool, failed: list[str], what: str) -> str:
    """Record one target (its line for the summary, ``what`` if missed); its verdict."""
    targets.append(f"{text}  {verdict(ok)}")
    if not ok:
        failed.append(what)
    return verdict(ok)


def _report_uncontended(
    cfg: Config, u: dict[str, Any], targets: list[str], failed: list[str]
) -> None:
    print_section(
        f"1. Uncontended acquire+release: {cfg.iters} iterations each after {cfg.warm} warm-up,"
        f" interleaved in {cfg.rounds} rounds (server and cluster alike)"
    )
    rows = []
    labels = {
        **KINDS,
        "floor-direct": "  (diagnostic: the same, plain client to the slot's master)",
        "redlease-direct": "  (diagnostic: the same, plain client to the slot's master)",
    }
    order = (
        "floor",
        "floor-direct",
        "floor-async",
        "redlease",
        "redlease-direct",
        "redlease-async",
    )
    for kind in order:
        label = labels[kind]
        srv = u.get(f"server/{kind.removesuffix(DIRECT_SUFFIX)}")
        clu = u.get(f"cluster/{kind}")
        if srv is None or clu is None:
            continue
        bad = srv if "error" in srv else clu if "error" in clu else None
        if bad is not None:
            rows.append(error_row(label, bad))
            if kind in ("redlease", "redlease-async"):
                failed.append(f"uncontended {kind} not measured")
            continue
        ratio = clu["ratio_server"]
        target = ""
        if kind in ("redlease", "redlease-async"):
            ok = ratio <= TARGET_RATIO
            target = f"<= {TARGET_RATIO:.1f}x  " + _target(
                targets,
                f"uncontended {label} p50: {ratio:.2f}x (goal <= {TARGET_RATIO:.1f}x)",
                ok,
                failed,
                f"uncontended {kind} {ratio:.2f}x",
            )
        rows.append(
            [
                label,
                fmt(srv["p50_us"], ".0f"),
                fmt(clu["p50_us"], ".0f"),
                f"{ratio:.2f}x",
                fmt(srv["p99_us"], ".0f"),
                fmt(clu["p99_us"], ".0f"),
                target,
            ]
        )
    print_table(
        [
            "operation",
            "server p50 us",
            "cluster p50 us",
            "cluster/server",
            "server p99 us",
            "cluster p99 us",
            "target",
        ],
        rows,
        "lrrrrrl",
    )


def _report_contended(
    cfg: Config, c: dict[str, Any], targets: list[str], failed: list[str]
) -> None:
    print_section(
        f"2. Contended: N processes on one lock, loop acquire -> tiny section -> release for"
        f" {cfg.contend_seconds:g} s; {cfg.repeats} run(s) of each, server and cluster"
        " alternated (rates and p50s: mean of the runs; longest wait, min/max: over all runs)"
    )
    rows = []
    loud: list[str] = []
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            for topo in TOPOS:
                row = c.get(f"{topo}/{lib}/{n}")
                label = f"{topo:<7}  {LIBS[lib]}  N={n}"
                if row is None:
                    continue
                if not row.get("acquisitions"):
                    rows.append(error_row(label, row))
                    failed.append(f"mutual exclusion not checked ({topo} {lib} N={n} failed)")
                    continue
                rows.append(
                    [
                        label,
                        fmt(row["acq_per_s"], ",.0f"),
                        fmt(row["handoff_p50_us"], ",.0f"),
                        fmt(row["handoff_p99_us"], ",.0f"),
                        f"{row['same_process_regrab'] * 100:.0f}%",
                        fmt(row["longest_wait_ms"], ",.1f"),
                        f"{row['per_process_min']}/{row['per_process_max']}",
                        fmt(row.get("server_cpu_us_per_acq"), ",.0f"),
                        exclusion_verdict(row, label, f"{topo} {lib} N={n}", loud, failed),
                    ]
                )
    print_table(
        [
            "topology / library",
            "acq/s",
            "hand-off p50 us",
            "p99 us",
            "same-proc",
            "longest wait ms",
            "per-proc min/max",
            "server CPU us/acq",
            "exclusion",
        ],
        rows,
        "lrrrrrrrl",
    )
    print("   server CPU: the one server's, or the sum over all 6 cluster nodes (replicas too)")
    print_violations(loud)
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            clu = c.get(f"cluster/{lib}/{n}", {})
            if "ratio_handoff_p50" not in clu or "ratio_acq_per_s" not in clu:
                if n == TARGET_N:
                    failed.append(f"{n}-process ratios not measured ({lib})")
                continue
            h, a = clu["ratio_handoff_p50"], clu["ratio_acq_per_s"]
            line = (
                f"   N={n} {LIBS[lib]}: cluster / server: hand-off p50 {h:.2f}x,"
                f" acq/s {a:.2f}x, longest wait {clu.get('ratio_longest_wait', float('nan')):.2f}x"
            )
            if n == TARGET_N:
                ok_h = h <= TARGET_RATIO
                ok_a = a >= 1 / TARGET_RATIO
                line += (
                    f"  (goals: hand-off <= {TARGET_RATIO:.1f}x {verdict(ok_h)},"
                    f" acq/s >= {1 / TARGET_RATIO:.2f}x {verdict(ok_a)})"
                )
                _target(
                    targets,
                    f"{n}-process hand-off p50, {LIBS[lib]}: {h:.2f}x"
                    f" (goal <= {TARGET_RATIO:.1f}x)",
                    ok_h,
                    failed,
                    f"{n}-process hand-off {lib} {h:.2f}x",
                )
                _target(
                    targets,
                    f"{n}-process acquisitions/s, {LIBS[lib]}: {a:.2f}x"
                    f" (goal >= {1 / TARGET_RATIO:.2f}x)",
                    ok_a,
                    failed,
                    f"{n}-process acq/s {lib} {a:.2f}x",
                )
            print(line)


def _names(calls: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])) or "-"


def _report_waiting(cfg: Config, w: dict[str, Any], targets: list[str], failed: list[str]) -> None:
    print_section(
        f"3. Waiting load on the cluster: one holder ({WAIT_TTL:g} s lease), {cfg.waiters} waiter"
        f" processes blocked; INFO commandstats summed over every node, ~{cfg.wait_window:g} s"
        " window, minus a baseline window (lock held, no waiter) just before"
    )
    if "error" in w:
        print(f"ERROR: {w['error']}")
        failed.append("cluster waiting load not measured")
        return
    ok = w["per_waiter_per_s"] <= TARGET_WAIT_CMDS
    target = f"= 0  {verdict(ok)}"
    _target(
        targets,
        f"blocked waiter on the cluster: {w['per_waiter_per_s']:.2f} commands/s (goal 0)",
        ok,
        failed,
        f"cluster waiting load {w['per_waiter_per_s']:.2f}/s/waiter",
    )
    print_table(
        ["nodes", "waiters", "window s", "commands", "baseline", "cmds/s/waiter", "target"],
        [
            [
                str(w["nodes"]),
                str(w["waiters"]),
                fmt(w["window_s"], ".2f"),
                str(w["commands"]),
                str(w["baseline_commands"]),
                fmt(w["per_waiter_per_s"], ".2f"),
                target,
            ]
        ],
        "rrrrrrl",
    )
    print(f"   counted in the window: {_names(w['counted'])}")
    print(f"   counted in the baseline: {_names(w['baseline_counted'])}")
    print(
        f"   not counted ({', '.join(NOT_COUNTED)}): window {_names(w['not_counted'])};"
        f" baseline {_names(w['baseline_not_counted'])}"
    )
    if w["window_end_after_hold_s"] >= WAIT_TTL / 3:
        print("   NOTE: the window reached the holder's first renewal (ttl/3): it may be counted")
    if w.get("after_release_errors"):
        print(f"   after the release: {w['after_release_errors'][0]}")
