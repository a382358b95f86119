#!/usr/bin/env python
"""Cluster benchmark: redlease's Lock on a Redis Cluster against the same on one server, in one run.

    .venv/bin/python benchmarks/cluster.py              # full run (about 3 minutes)
    .venv/bin/python benchmarks/cluster.py --quick      # smoke run (about 60 s)
    .venv/bin/python benchmarks/cluster.py --json out.json
    .venv/bin/python benchmarks/cluster.py --sections 2 --repeats 4   # on a quiet machine

It starts, itself, one server (``redlease.server.RedisServer``) and a 3-master + 3-replica
cluster (``redlease.topology.RedisClusterServers``), all on 127.0.0.1, and stops them at the
end (also on Ctrl-C, SIGTERM or an error). Three measurements (issue 9's "Done when"):

1. uncontended acquire+release p50 of redlease's ``Lock`` (sync and asyncio) and of the raw
   floor (SET NX PX + EVALSHA compare-and-delete), on the server and on the cluster,
   interleaved in rounds so that the machine's noise hits both alike: cluster / server;
2. N processes on one lock (4 and 16), on the server and on the cluster, alternated
   (server, cluster, then cluster, server, ...): acquisitions/s, hand-off p50, longest wait,
   per-process min/max, mutual exclusion; cluster / server;
3. on the cluster, one holder (30 s lease) and 8 waiter processes blocked on it: the commands
   every node (masters and replicas) processed over a window that ends before the holder's
   first renewal (ttl / 3), from ``INFO commandstats``, without the commands of the probe
   itself, of replication and of the cluster's own traffic (named in the table), and minus a
   baseline window with the lock held and no waiter; per blocked waiter per second.

The lock processes, their figures and the tables come from ``handoff.py`` and ``_common.py``
(the clients of a ``redis+cluster://host:port`` URL are ``RedisCluster`` clients).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import multiprocessing as mp
import os
import platform
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import handoff
from _common import (
    CAD_SCRIPT,
    Op,
    Progress,
    acquire_release,
    close_loop,
    collect,
    error_row,
    error_text,
    exclusion_verdict,
    fmt,
    interrupt_on_sigterm,
    latency_rows,
    load_average,
    now_ns,
    pick_libs,
    print_header,
    print_section,
    print_table,
    print_violations,
    reap_all,
    server_name,
    time_interleaved,
    verdict,
    write_json,
)

TOPOS = ("server", "cluster")
LIBS = {"redlease": "redlease Lock", "redlease-async": "redlease.asyncio Lock"}
KINDS = {  # section 1's operations, each measured on both topologies
    "floor": "raw floor: SET NX PX + EVALSHA del",
    "floor-async": "raw floor, redis.asyncio",
    "redlease": "redlease Lock",
    "redlease-async": "redlease.asyncio Lock",
}
DIRECT_SUFFIX = "-direct"  # diagnostics: a plain client straight to the slot's master
DIRECTS = ("floor-direct", "redlease-direct")
TARGET_RATIO = 1.2  # cluster / server: uncontended p50 and 16-process hand-off p50 (acq/s: 1/1.2)
TARGET_N = 16  # the contended size the targets are judged on
TARGET_WAIT_CMDS = 0.0  # commands per second per blocked waiter on the cluster
WAIT_TTL = 30.0  # section 3's lease: its first renewal (ttl / 3 = 10 s) is after both windows
# Section 3 does not count these commands: the probe's INFO, replication (REPLCONF ACK every
# second, the master's PING to its replicas) and the cluster clients' topology queries.
NOT_COUNTED = ("info", "ping", "replconf", "cluster", "command")


@dataclass
class Config:
    quick: bool
    libs: list[str]  # section 2's libraries
    iters: int
    warm: int
    rounds: int
    contend_sizes: tuple[int, ...]
    contend_seconds: float
    repeats: int  # section 2: runs of each (size, library, topology), alternating the order
    waiters: int
    wait_settle: float
    wait_window: float


# -- 1. uncontended ------------------------------------------------------------------------


def _ops(
    urls: dict[str, str], run_id: str, loop: asyncio.AbstractEventLoop, closers: list
) -> tuple[dict[str, Op], dict[str, str]]:
    """Every kind of operation on every topology, keyed ``topology/kind``; each with its own
    sync client, the asyncio ones sharing one client per topology."""
    import redis

    ops: dict[str, Op] = {}
    errors: dict[str, str] = {}
    failure = "uncontended acquire returned False"
    for topo, url in urls.items():
        try:
            sclient = handoff.sync_client(url)
            closers.append(sclient.close)
            aclient = loop.run_until_complete(handoff._async_make(url))
            closers.append(lambda c=aclient: loop.run_until_complete(c.aclose()))
        except Exception as exc:
            for kind in KINDS:
                errors[f"{topo}/{kind}"] = error_text(exc)
            continue
        sha = sclient.script_load(CAD_SCRIPT)  # on a cluster: on every master
        key = f"bench:{run_id}:floor:{topo}"

        def floor(c: Any = sclient, key: str = key, sha: str = sha) -> None:
            token = secrets.token_hex(16)
            c.set(key, token, nx=True, px=10000)
            c.evalsha(sha, 1, key, token)

        async def afloor(c: Any = aclient, key: str = key + ":a", sha: str = sha) -> None:
            token = secrets.token_hex(16)
            await c.set(key, token, nx=True, px=10000)
            await c.evalsha(sha, 1, key, token)

        ops[f"{topo}/floor"] = (False, floor)
        if topo == "cluster":
            # Diagnostic: the same two commands from a plain redis.Redis straight to the slot's
            # master: the cluster's own cost (replication, more servers), without RedisCluster's.
            node = sclient.get_node_from_key(key)
            direct = redis.Redis(host=node.host, port=node.port)
            closers.append(direct.close)
            ops[f"cluster/floor{DIRECT_SUFFIX}"] = (False, lambda c=direct: floor(c))
        ops[f"{topo}/floor-async"] = (True, afloor)
        name = f"bench:{run_id}:solo:{topo}"
        lock = handoff.make_sync_lock("redlease", sclient, name, 10.0)
        ops[f"{topo}/redlease"] = acquire_release(lock, False, failure)
        if topo == "cluster":
            # Diagnostic: redlease's Lock on a plain redis.Redis to the master of its slot
            # (redlease sees one server): its scripts' cost on a cluster node, without the
            # cluster client path.
            lnode = sclient.get_node_from_key(handoff.lease_key("redlease", name + ":d"))
            lclient = redis.Redis(host=lnode.host, port=lnode.port)
            closers.append(lclient.close)
            dlock = handoff.make_sync_lock("redlease", lclient, name + ":d", 10.0)
            ops[f"cluster/redlease{DIRECT_SUFFIX}"] = acquire_release(dlock, False, failure)
        alock = handoff.make_async_lock("redlease-async", aclient, name + ":a", 10.0)
        ops[f"{topo}/redlease-async"] = acquire_release(alock, True, failure)
    return ops, errors


def bench_uncontended(cfg: Config, urls: dict[str, str], run_id: str) -> dict[str, Any]:
    """Interleaved rounds (handoff.py's loop): every op on both topologies, order rotated."""
    loop = asyncio.new_event_loop()
    closers: list[Callable[[], None]] = []
    try:
        ops, errors = _ops(urls, run_id, loop, closers)
        lat, wall = time_interleaved(loop, ops, errors, cfg.warm, cfg.iters, cfg.rounds)
    finally:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                close()
        close_loop(loop)
    out = latency_rows(lat, wall, errors)
    for kind in (*KINDS, *DIRECTS):
        srv = out.get(f"server/{kind.removesuffix(DIRECT_SUFFIX)}", {})
        clu = out.get(f"cluster/{kind}", {})
        if srv.get("p50_us") and clu.get("p50_us"):
            clu["ratio_server"] = clu["p50_us"] / srv["p50_us"]
    return out


# -- 2. contended --------------------------------------------------------------------------


def bench_contended(
    cfg: Config, ctx: Any, url: str, lib: str, nproc: int, run_id: str
) -> dict[str, Any]:
    """handoff.py's contended run (its workers and figures) against ``url``."""
    hcfg = handoff.Config(
        url, cfg.quick, [lib], 0, 0, 1, (nproc,), cfg.contend_seconds, 0, 0.0, 0.0, 0.0
    )
    return handoff.bench_contended(hcfg, ctx, lib, nproc, run_id)


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


# -- 3. waiting load on the cluster --------------------------------------------------------


def _command_calls(probes: list[Any]) -> dict[str, int]:
    """``INFO commandstats`` calls per command, summed over ``probes`` (one per node)."""
    total: dict[str, int] = {}
    for probe in probes:
        for key, stats in probe.info("commandstats").items():
            name = key.removeprefix("cmdstat_")
            total[name] = total.get(name, 0) + int(stats["calls"])
    return total


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
    c0 = _command_calls(probes)
    t0 = now_ns()
    time.sleep(seconds)
    c1 = _command_calls(probes)
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
    held = handoff.HeldLock(ctx, "redlease", url, name, WAIT_TTL, list(range(n)))
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
        held.let_go.value = 1
        got = collect(held.results, n, timeout=30.0 + n * 1.0, procs=held.waiters)
        late = [e for _, _, _, e in got if e]
        if len(got) < n:
            late.append(f"{n - len(got)} waiter(s) never acquired after the release")
        if late:
            row["after_release_errors"] = late[:3]
    except Exception as exc:
        row["error"] = error_text(exc)
    finally:
        for probe in probes:
            probe.close()
        held.stop()
    return row


# -- report --------------------------------------------------------------------------------


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


# -- main ----------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="short smoke run (small samples)")
    p.add_argument("--json", metavar="FILE", help="write the raw figures to FILE")
    p.add_argument(
        "--libs",
        default="redlease",
        help=f"section 2's libraries, comma-separated subset of: {', '.join(LIBS)}",
    )
    p.add_argument("--sections", default="1,2,3", help="subset of the sections 1,2,3 to run")
    p.add_argument(
        "--repeats",
        type=int,
        help="section 2: runs of each configuration, server and cluster alternated"
        " (default 2, 1 with --quick); more runs average out a noisy machine",
    )
    return p.parse_args(argv)


def _environment(urls: dict[str, str], cluster: Any) -> dict[str, Any]:
    import redis

    def name(url: str) -> str:
        probe = handoff.server_probes(url)[0]
        try:
            return server_name(probe.info("server"))
        finally:
            probe.close()

    return {
        "server": name(urls["server"]),
        "cluster": name(urls["cluster"]),
        "cluster_nodes": len(cluster.nodes),
        "cluster_startup_s": cluster.startup_seconds or float("nan"),
        "redis_py": redis.__version__,
        "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "urls": urls,
    }


def _config(quick: bool, libs: list[str]) -> Config:
    if quick:
        return Config(True, libs, 400, 50, 4, (16,), 1.0, 1, 4, 0.4, 1.0)
    return Config(False, libs, 3000, 300, 10, (4, 16), 3.0, 2, 8, 0.5, 3.0)


def _run(
    cfg: Config,
    sections: set[str],
    urls: dict[str, str],
    ports: list[int],
    data: dict[str, Any],
    progress: Progress,
) -> None:
    ctx = mp.get_context("spawn")
    run_id = secrets.token_hex(4)
    if "1" in sections:
        progress.uncontended(data, lambda: bench_uncontended(cfg, urls, run_id), "server/redlease")
    if "2" in sections:
        try:
            data["contended"] = bench_all_contended(cfg, ctx, urls, run_id, progress)
        except Exception as exc:
            data["contended"] = {f"server/redlease/{TARGET_N}": {"error": error_text(exc)}}
    if "3" in sections:
        progress("waiting load on the cluster")
        data["waiting"] = bench_waiting(cfg, ctx, urls["cluster"], ports, run_id)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = {s.strip() for s in args.sections.split(",")}
    cfg = _config(args.quick, libs)
    if args.repeats is not None:
        if args.repeats < 1:
            print(f"--repeats must be >= 1, got {args.repeats}", file=sys.stderr)
            return 2
        cfg.repeats = args.repeats
    interrupt_on_sigterm()
    from redlease.server import RedisServer
    from redlease.topology import RedisClusterServers

    progress = Progress()
    data: dict[str, Any] = {
        "env": {},
        "uncontended": {},
        "contended": {},
        "waiting": {},
        "targets": [],
    }
    server = RedisServer()
    cluster = RedisClusterServers(masters=3, replicas_per_master=1)
    load_before = load_average()
    try:
        progress("starting one server and a 3-master + 3-replica cluster")
        server.start()
        cluster.start()
        urls = {
            "server": server.url,
            "cluster": handoff.cluster_url(cluster.nodes[0].url),
        }
        data["env"] = _environment(urls, cluster)
        data["env"]["load_before"] = load_before
        data["env"]["quick"] = cfg.quick
        _run(cfg, sections, urls, [srv.port for srv in cluster.nodes], data, progress)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        reap_all()
        cluster.close()
        server.stop()
        data["env"]["load_after"] = load_average()
        data["env"]["elapsed_s"] = progress.elapsed()
    progress("done")
    failed = report(cfg, data)
    data["failed_targets"] = failed
    if args.json:
        write_json(args.json, data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
