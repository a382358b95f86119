"""The Redlock benchmark's tables, one per section, and its targets."""

from __future__ import annotations

import os
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

from suites.redlock.config import TARGET_VS_NOTHING, TARGET_VS_POTTERY, Config
from suites.redlock.libs import FLOORS, LIBS, MINE, SIZES

CHECKED: list[str] = []  # the targets that were evaluated (passed or not)


def report(cfg: Config, data: dict[str, Any]) -> list[str]:
    failed: list[str] = []
    env = data["env"]
    print_header(
        f"redlease Redlock benchmark  |  {env['servers']} x {env['server']}  |  redis-py"
        f" {env['redis_py']}  |  pottery {env['pottery']}  |  aioredlock {env['aioredlock']}"
        f"  |  Python {env['python']}  |  {env['cpus']} CPUs  |  load avg {env['load_before']}"
        f" -> {env['load_after']}",
        cfg.quick,
    )
    if data["uncontended"]:
        _report_uncontended(cfg, data["uncontended"], failed)
    if data["contended"]:
        _report_contended(cfg, data["contended"], failed)
    if data["paused"]:
        _report_paused(cfg, data["paused"])
    print()
    if failed:
        print("Targets missed: " + "; ".join(failed))
    elif not CHECKED:
        print("No target was measured (they need redlease, and pottery for section 2).")
    else:
        print(f"All targets met ({len(CHECKED)} checked).")
    return failed


def _report_uncontended(cfg: Config, u: dict[str, Any], failed: list[str]) -> None:
    lo, hi = min(SIZES), max(SIZES)
    print_section(
        f"1. Uncontended acquire+release, 1 and {hi} servers: {cfg.iters} iterations per row"
        f" after {cfg.warm} warm-up, interleaved in {cfg.rounds} rounds"
    )
    rows = []
    labels = {**FLOORS, **LIBS}
    for base in [*FLOORS, *cfg.libs]:
        for n in SIZES:
            row = u.get(f"{base}/{n}")
            label = f"{labels[base]}  N={n}"
            if row is None:
                continue
            if "error" in row:
                rows.append(error_row(label, row))
                if base in MINE:
                    failed.append(f"uncontended {base} N={n} not measured")
                continue
            scaling = adjusted = target = ""
            if n == hi and row.get("scaling"):
                scaling = f"{row['scaling']:.2f}x"
                if row.get("scaling_over_floor"):
                    adjusted = f"{row['scaling_over_floor']:.2f}x"
            if n == hi and base in MINE:
                # The target: the do-nothing Redlock of the same kind over the same servers
                # (five servers on two cores cost even it ~2x one server).
                if row.get("ratio_nothing"):
                    ok = row["ratio_nothing"] <= TARGET_VS_NOTHING
                    CHECKED.append(f"uncontended {base}")
                    target = f"<= {TARGET_VS_NOTHING:.2f}x  {verdict(ok)}"
                    if not ok:
                        failed.append(
                            f"uncontended {base} N={hi} {row['ratio_nothing']:.2f}x do-nothing"
                        )
                else:
                    failed.append(f"uncontended {base} vs do-nothing not measured")
            rows.append(
                [
                    label,
                    fmt(row["ops_per_s"], ",.0f"),
                    fmt(row["p50_us"], ",.0f"),
                    fmt(row["p99_us"], ",.0f"),
                    f"{row['ratio_floor']:.2f}x" if row.get("ratio_floor") else "",
                    f"{row['ratio_nothing']:.2f}x" if row.get("ratio_nothing") else "",
                    scaling,
                    adjusted,
                    target,
                ]
            )
    print_table(
        [
            "library",
            "ops/s",
            "p50 us",
            "p99 us",
            "p50/floor",
            "p50/do-nothing",
            f"N={hi}/N={lo} p50",
            "/ floor's",
            f"target N={hi}",
        ],
        rows,
        "lrrrrrrrl",
    )
    print(
        "   p50/floor: ÷ the raw floor of the same kind (sync: the do-nothing Redlock; asyncio:"
        " redis.asyncio + gather) over the same N; p50/do-nothing: ÷ the do-nothing Redlock of"
        " the same kind (one kept connection per server, SET NX PX written to all then read,"
        " compare-and-delete the same way) over the same N: the target, in this same run;"
        f" N={hi}/N={lo} p50: the row's p50 ÷ the same library's N={lo} p50;"
        " / floor's: that ratio ÷ the floor's own ratio (what the library adds to the"
        " machine's cost of talking to 5 servers)"
    )


def _report_contended(cfg: Config, c: dict[str, Any], failed: list[str]) -> None:
    print_section(
        f"2. Contended: {cfg.workers} processes on one lock, loop acquire -> tiny section ->"
        f" release for {cfg.contend_seconds:g} s (failed attempts are retried)"
    )
    rows = []
    loud: list[str] = []
    for nserv in cfg.contend_servers:
        for lib in cfg.libs:
            row = c.get(f"{lib}/{nserv}")
            if row is None:
                continue
            label = f"{LIBS[lib]}  N={nserv}"
            if "error" in row and not row.get("acquisitions"):
                rows.append(error_row(label, row))
                if lib in MINE:
                    failed.append(f"contended {lib} N={nserv} not measured")
                continue
            excl = exclusion_verdict(
                row, f"{LIBS[lib]} N={nserv}", f"{lib} N={nserv}", loud, failed
            )
            if lib in MINE and row["starved"]:
                failed.append(f"contended {lib} N={nserv}: {row['starved']} process(es) starved")
            errs = row["call_errors"]
            rows.append(
                [
                    label,
                    fmt(row["acq_per_s"], ",.0f"),
                    fmt(row["failed_per_s"], ",.0f") + (f" +{errs} err" if errs else ""),
                    fmt(row["handoff_p50_us"], ",.0f"),
                    f"{row['same_process_regrab'] * 100:.0f}%",
                    fmt(row["longest_wait_ms"], ",.0f"),
                    f"{row['per_process_min']}/{row['per_process_max']}",
                    str(row["starved"]),
                    fmt(row["client_cpu_us_per_acq"], ",.0f"),
                    fmt(row["server_cpu_us_per_acq"], ",.0f"),
                    fmt(row["cpu_s_per_s"], ".2f"),
                    fmt(row.get("scripts_per_acq"), ".1f"),
                    fmt(row.get("commands_per_acq"), ".0f"),
                    fmt(row.get("messages_per_acq"), ".1f"),
                    excl,
                ]
            )
    print_table(
        [
            "library",
            "acq/s",
            "failed/s",
            "hand-off p50 us",
            "same-proc",
            "longest wait ms",
            "per-proc min/max",
            "starved",
            "client CPU us/acq",
            "servers CPU us/acq",
            "CPU s/s",
            "scripts/acq",
            "cmds/acq",
            "msgs/acq",
            "exclusion",
        ],
        rows,
        "lrrrrrrrrrrrrrl",
    )
    for nserv in cfg.contend_servers:
        for lib in cfg.libs:
            row = c.get(f"{lib}/{nserv}", {})
            if row.get("warm_up_errors"):
                print(
                    f"   note: {LIBS[lib]} N={nserv}: {row['warm_up_errors']} warm-up call(s)"
                    f" failed before the run and were retried; first:"
                    f" {row['warm_up_error_example'][0][:160]}"
                )
            if row.get("call_errors"):
                print(
                    f"   note: {LIBS[lib]} N={nserv}: {row['call_errors']} call(s) raised during"
                    f" the run (retried); first: {row['call_error_example'][0][:160]}"
                )
    print_violations(loud)
    for nserv in cfg.contend_servers:
        peer = c.get(f"pottery/{nserv}", {})
        for mine in MINE:
            base = c.get(f"{mine}/{nserv}", {})
            if mine not in cfg.libs:
                continue
            if base.get("acq_per_s") and peer.get("acq_per_s"):
                ratio = base["acq_per_s"] / peer["acq_per_s"]
                ok = ratio >= TARGET_VS_POTTERY and base["starved"] == 0
                CHECKED.append(f"contended {mine}")
                print(
                    f"   N={nserv}: {LIBS[mine]} / pottery acq/s {ratio:.2f}x"
                    f" (target >= {TARGET_VS_POTTERY:g}x), starved {base['starved']}"
                    f" (target 0): {verdict(ok)}"
                )
                if ratio < TARGET_VS_POTTERY:
                    failed.append(f"contended {mine} N={nserv} {ratio:.2f}x pottery")
            elif mine in cfg.libs and "pottery" in cfg.libs:
                failed.append(f"contended {mine} vs pottery N={nserv} not measured")
    _report_why(cfg, c)
    print(
        "   CPU s/s: (all workers' + all servers' CPU) / window, out of"
        f" {os.cpu_count()} CPU s/s on this machine (shared with whatever else runs);"
        " scripts/acq: EVALSHA+EVAL calls on all servers per acquisition (pottery's acquire"
        " is a plain SET, not a script); cmds/acq: all commands, Lua-internal ones included"
    )


def _report_why(cfg: Config, c: dict[str, Any]) -> None:
    """``--why``: per acquisition, redlease's rounds by outcome and cause, messages by kind."""
    for nserv in cfg.contend_servers:
        for lib in MINE:
            why = c.get(f"{lib}/{nserv}", {}).get("why")
            if not why:
                continue
            print(f"   {LIBS[lib]} N={nserv}, per acquisition ({why['acquisitions']:.0f} traced):")
            for key, value in why.items():
                if key != "acquisitions":
                    print(f"      {key:<48} {value:6.2f}")


def _report_paused(cfg: Config, p: dict[str, Any]) -> None:
    print_section(
        f"3. Two of five servers paused (SIGSTOP), connections warmed before: {cfg.pause_iters}"
        f" x acquire+release, at most {cfg.pause_budget:g} s per library (informative)"
    )
    rows = []
    for lib in cfg.libs:
        row = p.get(lib)
        if row is None:
            continue
        if "error" in row and not row.get("completed"):
            rows.append(error_row(LIBS[lib], row))
            continue
        note = row.get("note", "")
        if row.get("errors"):
            note = (note + "; " if note else "") + row["errors"][0]
        rows.append(
            [
                LIBS[lib],
                f"{row['acquired']}/{row['iters']}",
                fmt(row["first_acquire_ms"], ",.1f"),
                fmt(row["acquire_p50_ms"], ",.1f"),
                fmt(row["acquire_max_ms"], ",.1f"),
                fmt(row["release_p50_ms"], ",.1f"),
                note[:110],
            ]
        )
    print_table(
        [
            "library",
            "acquired",
            "first acquire ms",
            "acquire p50 ms",
            "max ms",
            "release p50 ms",
            "note",
        ],
        rows,
        "lrrrrrl",
    )
