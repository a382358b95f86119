"""The hand-off benchmark's tables, one per section, and its targets: each ``_report_*``
prints one section and appends the targets it missed."""

from __future__ import annotations

from collections.abc import Callable
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

from suites.handoff.config import (
    JOIN_AT,
    TARGET_RECOVERY_SLACK,
    TARGET_UNCONTENDED,
    TARGET_WAIT_CMDS,
    Config,
)
from suites.handoff.libs import ASYNC_LIBS, DIAG_NORENEW, LIBS, MINE


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    """Print the tables; returns the list of failed targets (each ``_report_*`` prints one
    section and appends the targets it missed)."""
    failed: list[str] = []
    env = data["env"]
    print_header(
        f"redlease hand-off benchmark  |  server {env['server']}  |  redis-py {env['redis_py']}"
        f" ({'hiredis' if env['hiredis'] else 'python'} parser)  |  Python {env['python']}"
        f"  |  {env['cpus']} CPUs  |  load avg {env['load_before']} -> {env['load_after']}",
        cfg.quick,
    )
    if data["uncontended"]:
        _report_uncontended(cfg, data["uncontended"], failed)
    if data["contended"]:
        _report_contended(cfg, data, failed)
    if data["waiting"]:
        _report_waiting(cfg, data, failed)
    if data["crash"]:
        _report_crash(cfg, data, failed)
    print()
    if failed:
        print("Targets missed: " + "; ".join(failed))
    elif not any(lib.startswith("redlease") for lib in cfg.libs):
        print("No redlease target was measured (redlease not among --libs).")
    else:
        print("All targets met.")
    return failed


def _library_rows(
    cfg: Config,
    section: dict[str, Any],
    what: str,
    failed: list[str],
    measured: Callable[[str, dict[str, Any]], list[str]],
) -> list[list[str]]:
    """A table row per library of ``section``: ``measured(lib, row)``, or an ERROR row (and
    for redlease's, ``what`` not measured among the failed targets)."""
    rows = []
    for lib in cfg.libs:
        row = section.get(lib)
        if row is None:
            continue
        if "error" in row:
            rows.append(error_row(LIBS[lib], row))
            if lib in MINE:
                failed.append(f"{what} not measured ({lib} failed)")
            continue
        rows.append(measured(lib, row))
    return rows


def _report_uncontended(cfg: Config, u: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"1. Uncontended acquire+release: {cfg.iters} iterations each after {cfg.warm} warm-up,"
        f" interleaved in {cfg.rounds} rounds"
    )
    rows = []
    labels = {
        "floor": "raw floor: SET NX PX + EVALSHA del",
        "floor-async": "raw floor, redis.asyncio",
        "kept": "kept-connection floor (send+read)",
        "kept-async": "kept-connection floor, asyncio",
        **LIBS,
        DIAG_NORENEW: "  (diagnostic: redlease renew=False)",
    }
    keys = ["floor", "floor-async", "kept", "kept-async", *cfg.libs]
    if "redlease" in keys:
        keys.insert(keys.index("redlease") + 1, DIAG_NORENEW)
    for key in keys:
        row = u.get(key)
        if row is None:
            continue
        if "error" in row:
            rows.append(error_row(labels[key], row))
            if key in ("floor", "redlease"):
                failed.append(f"uncontended target not measured ({key} failed)")
            continue
        target = ""
        ratio_key = {"redlease": "ratio_floor", "redlease-async": "ratio_floor_async"}.get(key)
        if ratio_key is not None and ratio_key in row:
            ok = row[ratio_key] <= TARGET_UNCONTENDED
            target = f"<= {TARGET_UNCONTENDED:.2f}x  {verdict(ok)}"
            if not ok:
                failed.append(f"uncontended {key} p50 {row[ratio_key]:.2f}x its floor")
        extra = ""
        is_async = key in ASYNC_LIBS or key in ("floor-async", "kept-async")
        if is_async:
            extra = f"{row.get('ratio_floor_async', float('nan')):.2f}x"
        kept_ratio = row.get("ratio_kept_async" if is_async else "ratio_kept", float("nan"))
        rows.append(
            [
                labels[key],
                fmt(row["ops_per_s"], ",.0f"),
                fmt(row["p50_us"], ".0f"),
                fmt(row["p99_us"], ".0f"),
                f"{row['ratio_floor']:.2f}x",
                extra,
                f"{kept_ratio:.2f}x",
                target,
            ]
        )
    print_table(
        [
            "library",
            *("ops/s", "p50 us", "p99 us"),
            *("p50/floor", "p50/async floor", "p50/kept", "target"),
        ],
        rows,
        "lrrrrrrl",
    )


def _report_contended(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"2. Contended: N processes on one lock, loop acquire -> tiny section -> release for"
        f" {cfg.contend_seconds:g} s"
    )
    rows = []
    loud: list[str] = []
    for n in cfg.contend_sizes:
        for lib in cfg.libs:
            row = data["contended"].get(f"{lib}/{n}")
            if row is None:
                continue
            if "error" in row and not row.get("acquisitions"):
                rows.append(error_row(f"{LIBS[lib]}  N={n}", row))
                if lib in MINE:
                    failed.append(f"mutual exclusion not checked ({lib} N={n} failed)")
                continue
            rows.append(
                [
                    f"{LIBS[lib]}  N={n}",
                    fmt(row["acq_per_s"], ",.0f"),
                    fmt(row["handoff_p50_us"], ",.0f"),
                    fmt(row["handoff_p99_us"], ",.0f"),
                    f"{row['same_process_regrab'] * 100:.0f}%",
                    fmt(row["longest_wait_ms"], ",.1f"),
                    f"{row['per_process_min']}/{row['per_process_max']}",
                    fmt(row.get("client_cpu_us_per_acq"), ",.0f"),
                    fmt(row.get("server_cpu_us_per_acq"), ",.0f"),
                    "/".join(
                        fmt(row.get(f"{label}_per_acq"), ".2f")
                        for label in ("scripts", "PUBLISH", "ZADD")
                    ),
                    exclusion_verdict(row, f"{LIBS[lib]} N={n}", f"{lib} N={n}", loud, failed),
                ]
            )
    print_table(
        [
            "library",
            "acq/s",
            "hand-off p50 us",
            "p99 us",
            "same-proc",
            "longest wait ms",
            "per-proc min/max",
            "client CPU us/acq",
            "server CPU us/acq",
            "scripts/PUBLISH/ZADD per acq",
            "exclusion",
        ],
        rows,
        "lrrrrrrrrrl",
    )
    print_violations(loud)
    _print_against_peer(cfg, data["contended"])


def _print_against_peer(cfg: Config, contended: dict[str, Any]) -> None:
    """redlease against the fair peer, same run (informative; redis-py's acq/s is mostly one
    process re-grabbing its own lock, see same-proc)."""
    for n in cfg.contend_sizes:
        for mine in MINE:
            base = contended.get(f"{mine}/{n}", {})
            peer = contended.get(f"python-redis-lock/{n}", {})
            keys = ("acq_per_s", "handoff_p50_us", "longest_wait_ms", "client_cpu_us_per_acq")
            if all(base.get(k) and peer.get(k) for k in keys):
                print(
                    f"   N={n}: {LIBS[mine]} / python-redis-lock:"
                    f" acq/s {base['acq_per_s'] / peer['acq_per_s']:.2f}x,"
                    f" hand-off p50 {base['handoff_p50_us'] / peer['handoff_p50_us']:.2f}x,"
                    f" longest wait {base['longest_wait_ms'] / peer['longest_wait_ms']:.2f}x,"
                    " client CPU/acq"
                    f" {base['client_cpu_us_per_acq'] / peer['client_cpu_us_per_acq']:.2f}x"
                )
        floor = contended.get(f"fifo-floor/{n}", {})
        for lib in (*MINE, "python-redis-lock"):
            row = contended.get(f"{lib}/{n}", {})
            if row.get("longest_wait_ms") and floor.get("longest_wait_ms"):
                print(
                    f"   N={n}: {LIBS[lib]} / the FIFO floor:"
                    f" acq/s {row['acq_per_s'] / floor['acq_per_s']:.2f}x,"
                    f" hand-off p50 {row['handoff_p50_us'] / floor['handoff_p50_us']:.2f}x,"
                    f" longest wait {row['longest_wait_ms'] / floor['longest_wait_ms']:.2f}x"
                    f" (the floor's own: {floor['longest_wait_ms']:,.0f} ms)"
                )
        base = contended.get(f"redlease-barging/{n}", {})
        peer = contended.get(f"redis-py/{n}", {})
        if all(base.get(k) and peer.get(k) for k in ("acq_per_s", "longest_wait_ms")):
            print(
                f"   N={n}: {LIBS['redlease-barging']} / redis-py Lock:"
                f" acq/s {base['acq_per_s'] / peer['acq_per_s']:.2f}x (target >= 1),"
                f" longest wait {base['longest_wait_ms'] / peer['longest_wait_ms']:.2f}x"
                " (target <= 0.1)"
            )


def _report_waiting(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"3. Waiting load: one holder (10 s lease), {cfg.waiters} waiter processes blocked;"
        f" INFO total_commands_processed delta over ~{cfg.wait_window:g} s"
        " (Lua-internal calls count)"
    )
    rows = _library_rows(
        cfg,
        data["waiting"],
        "waiting-load target",
        failed,
        lambda lib, row: _waiting_row(lib, row, failed),
    )
    print_table(
        ["library", "waiters", "window s", "commands", "cmds/s/waiter", "target", "note"],
        rows,
        "lrrrrll",
    )


def _waiting_row(lib: str, row: dict[str, Any], failed: list[str]) -> list[str]:
    target = ""
    if lib in MINE:
        ok = row["per_waiter_per_s"] <= TARGET_WAIT_CMDS
        target = f"= 0  {verdict(ok)}"
        if not ok:
            failed.append(f"waiting load {lib} {row['per_waiter_per_s']:.2f}/s/waiter")
    note = ""
    if row.get("window_end_after_hold_s", 0) >= 10.0 / 3:
        note = "window reached the holder's first renewal (ttl/3): it may be counted; "
    if row.get("after_release_errors"):
        note += "after release: " + row["after_release_errors"][0]
    return [
        LIBS[lib],
        str(row["waiters"]),
        fmt(row["window_s"], ".2f"),
        str(row["commands"]),
        fmt(row["per_waiter_per_s"], ".2f"),
        target,
        note,
    ]


def _report_crash(cfg: Config, data: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"4. Crash recovery: holder (ttl {cfg.crash_ttl:g} s) SIGKILLed while a process waits"
        f" (it started waiting {JOIN_AT * cfg.crash_ttl:g} s into the lease, the kill came"
        f" 0.3 s later); target kill->acquire <= ttl + {TARGET_RECOVERY_SLACK * 1000:.0f} ms"
    )
    rows = _library_rows(
        cfg,
        data["crash"],
        "crash-recovery target",
        failed,
        lambda lib, row: _crash_row(cfg, lib, row, failed),
    )
    print_table(
        [
            "library",
            "kill->acquire ms",
            "/ ttl",
            "lease left at kill ms",
            "lease end->acquire ms",
            "strict",
            "target",
        ],
        rows,
        "lrrrrrl",
    )
    print(
        "   strict = kill->acquire / (lease left at kill + "
        f"{TARGET_RECOVERY_SLACK * 1000:.0f} ms): <= 1 means the waiter got the lock within"
        f" {TARGET_RECOVERY_SLACK * 1000:.0f} ms of the lease really running out"
    )


def _crash_row(cfg: Config, lib: str, row: dict[str, Any], failed: list[str]) -> list[str]:
    limit = 1 + TARGET_RECOVERY_SLACK / cfg.crash_ttl
    # strict: against the lease actually left at the kill (a renewing library extended it)
    strict = row["kill_to_acquire_s"] / (row["lease_left_at_kill_s"] + TARGET_RECOVERY_SLACK)
    row["ratio_lease_left"] = strict
    target = ""
    if lib in MINE:
        ok = row["ratio_ttl"] <= limit and strict <= 1.0
        target = f"<= {limit:.3f} and strict <= 1  {verdict(ok)}"
        if not ok:
            failed.append(f"crash recovery {lib} {row['ratio_ttl']:.3f} x ttl, strict {strict:.3f}")
    return [
        LIBS[lib],
        fmt(row["kill_to_acquire_s"] * 1000, ",.0f"),
        fmt(row["ratio_ttl"], ".3f"),
        fmt(row["lease_left_at_kill_s"] * 1000, ",.0f"),
        fmt(row["lease_end_to_acquire_ms"], ",.1f"),
        fmt(strict, ".3f"),
        target,
    ]
