"""The inventory benchmark's rounds (every strategy in every buyer process at once, the order
reversed every other round, each strategy keeping its best round), its report and its run."""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import secrets
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from harness import config
from harness.cpu import process_cpu
from harness.report import print_table, verdict, write_json
from harness.run import load_1min
from harness.timing import alternate, pct

from suites.inventory.buyers import Crew
from suites.inventory.strategies import SEED, STRATEGIES, all_keys, reset

DESCRIPTION = (
    "Inventory benchmark: reservations per second, atomic vs lock vs WATCH, against a floor."
)
TARGET_VS_LOCK = 10.0  # atomic / lock, at least
TARGET_FLOOR = 1.2  # floor / atomic, at most
TARGET_VS_SEED = 0.8  # atomic / seed, at least


@dataclass
class Figures:
    """One strategy's best round over all processes."""

    strategy: str
    per_second: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    retries: int = 0
    client_us: float = 0.0  # buyer processes' CPU per reservation (warm-up included), us
    server_us: float = 0.0  # the server's CPU per reservation (private server only), us
    rounds: list[float] = field(default_factory=list)  # reservations/s of every round


def run(
    args: argparse.Namespace, url: str, label: str, server_pid: int | None = None
) -> dict[str, Any]:
    """Measure every strategy over ``args.rounds`` rounds; the figures and verdicts.

    ``server_pid``: the server's process (a private one), to report its CPU per reservation.
    """
    import redis

    load_before = load_1min()
    client = redis.Redis.from_url(url)
    run_id = secrets.token_hex(4)
    sha = client.script_load("return 1")
    from redlease._core.inventory import RESERVE

    client.script_load(RESERVE.source)
    client.script_load(SEED)
    figures = {name: Figures(name) for name in STRATEGIES}
    crew = Crew(url, run_id, args.processes, args.concurrency)
    try:
        for r in range(args.rounds):
            order = alternate(STRATEGIES, r)
            for name in order:
                reset(client, run_id)
                server_before = process_cpu(server_pid)
                measures = crew.measure(name, sha, args.warmup, args.seconds)
                server_used = process_cpu(server_pid) - server_before
                rate = sum(m.ops for m in measures) / args.seconds
                done = sum(m.done for m in measures) or 1
                fig = figures[name]
                fig.rounds.append(round(rate, 1))
                print(f"  round {r + 1}: {name:<7} {rate:>10,.0f} /s", file=sys.stderr, flush=True)
                if rate >= fig.per_second:
                    latencies = sorted(x for m in measures for x in m.latencies)
                    fig.per_second = round(rate, 1)
                    fig.p50_ms = round(pct(latencies, 50), 3) if latencies else 0.0
                    fig.p99_ms = round(pct(latencies, 99), 3) if latencies else 0.0
                    fig.retries = sum(m.retries for m in measures)
                    fig.client_us = round(sum(m.cpu for m in measures) / done * 1e6, 1)
                    fig.server_us = round(server_used / done * 1e6, 1)
    finally:
        crew.stop()
        with contextlib.suppress(Exception):
            client.unlink(*all_keys(run_id))
        client.close()
    atomic, lock, floor, seed, script, lean = (
        figures[n].per_second for n in ("atomic", "lock", "floor", "seed", "script", "seed-lean")
    )
    vs_lock = atomic / lock if lock else float("inf")
    vs_floor = floor / atomic if atomic else float("inf")
    vs_seed = atomic / seed if seed else 0.0
    return {
        "server": label,
        "machine": f"{platform.system()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}",
        "load": [load_before, load_1min()],
        "processes": args.processes,
        "concurrency": args.concurrency,
        "seconds": args.seconds,
        "rounds": args.rounds,
        "strategies": [asdict(fig) for fig in figures.values()],
        "atomic_vs_lock": round(vs_lock, 2),
        "floor_vs_atomic": round(vs_floor, 3),
        "atomic_vs_seed": round(vs_seed, 3),
        "script_vs_seed": round(script / seed, 3) if seed else 0.0,
        "atomic_vs_seed_lean": round(atomic / lean, 3) if lean else 0.0,
        "atomic_vs_seed_cpu": _cpu_ratio(figures["seed"], figures["atomic"]),
        "atomic_vs_seed_lean_cpu": _cpu_ratio(figures["seed-lean"], figures["atomic"]),
        "pass_vs_lock": vs_lock >= TARGET_VS_LOCK,
        "pass_floor": vs_floor <= TARGET_FLOOR,
        "pass_vs_seed": vs_seed >= TARGET_VS_SEED,
    }


def _cpu_ratio(base: Figures, fig: Figures) -> float:
    """``base``'s CPU per reservation (buyers + server) over ``fig``'s: the ratio of their
    rates on a machine whose CPU is the limit, much steadier than the rates themselves on a
    shared machine (0.0 without the server's figure)."""
    mine = fig.client_us + fig.server_us
    if not (base.server_us and fig.server_us and mine):
        return 0.0
    return round((base.client_us + base.server_us) / mine, 3)


def report(result: dict[str, Any]) -> None:
    """Print the table and the verdicts."""
    print(
        f"inventory benchmark: {result['processes']} processes x {result['concurrency']} "
        f"concurrent buyers, {result['seconds']:g} s per measurement, best of "
        f"{result['rounds']} rounds\nserver: {result['server']}\nmachine: {result['machine']}; "
        f"load average {result['load'][0]} before, {result['load'][1]} after\n"
    )
    atomic = next(f for f in result["strategies"] if f["strategy"] == "atomic")["per_second"]
    rows = []
    for fig in result["strategies"]:
        ratio = f"{fig['per_second'] / atomic:.2f}x" if atomic else "-"
        rows.append(
            [
                fig["strategy"],
                f"{fig['per_second']:,.0f}",
                f"{fig['p50_ms']:.2f}",
                f"{fig['p99_ms']:.2f}",
                f"{fig['retries']:,}",
                ratio,
                f"{fig['client_us']:.0f}",
                f"{fig['server_us']:.0f}" if fig["server_us"] else "-",
            ]
        )
    print_table(
        [
            "strategy",
            "reservations/s",
            "p50 ms",
            "p99 ms",
            "retries",
            "vs atomic",
            "client CPU us",
            "server CPU us",
        ],
        rows,
        indent="  ",
        gap="   ",
        rule=False,
    )
    print(
        f"\n  atomic / lock   {result['atomic_vs_lock']:>7.2f}x   target >= {TARGET_VS_LOCK:g}x"
        f"   {verdict(result['pass_vs_lock'])}"
        f"\n  floor / atomic  {result['floor_vs_atomic']:>7.2f}x   target <= {TARGET_FLOOR:g}x"
        f"   {verdict(result['pass_floor'])}"
        f"\n  atomic / seed   {result['atomic_vs_seed']:>7.2f}x   target >= {TARGET_VS_SEED:g}x"
        f"   {verdict(result['pass_vs_seed'])}   (script / seed {result['script_vs_seed']:.2f}x,"
        f" atomic / seed-lean {result['atomic_vs_seed_lean']:.2f}x)"
        f"\n  by CPU per reservation (buyers + server): atomic / seed "
        f"{result['atomic_vs_seed_cpu']:.2f}x, atomic / seed-lean "
        f"{result['atomic_vs_seed_lean_cpu']:.2f}x"
    )


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line's options, checked and bounded."""
    p = config.parser(DESCRIPTION)
    config.add_url(p)
    config.add_quick(p, help="short smoke run")
    p.add_argument("--processes", type=int, default=4, help="buyer processes (default: 4)")
    p.add_argument(
        "--concurrency", type=int, default=8, help="concurrent buyers per process (default: 8)"
    )
    p.add_argument("--seconds", type=float, default=3.0, help="measured seconds (default: 3)")
    p.add_argument("--rounds", type=int, default=3, help="rounds (default: 3)")
    config.add_json(p, help="write the figures to FILE")
    args = p.parse_args(argv)
    if not (1 <= args.processes <= 32 and 1 <= args.concurrency <= 256):
        p.error("--processes must be 1..32 and --concurrency 1..256")
    if not (0.1 <= args.seconds <= 60 and 1 <= args.rounds <= 10):
        p.error("--seconds must be 0.1..60 and --rounds 1..10")
    if args.quick:
        args.seconds, args.rounds = 1.0, 1
    args.warmup = min(0.5, args.seconds / 2)
    return args


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; exit code 0 if every target passes, 1 otherwise."""
    args = parse_args(argv)
    server = None
    url = args.url
    label = url or ""
    if url is None:
        from redlease.server import RedisServer, find_server_binary

        binary = find_server_binary()
        server = RedisServer(binary=binary).start()
        url = server.url
        label = f"a private {os.path.basename(binary)} {server.version} at {url}, defaults"
    try:
        result = run(args, url, label, server.pid if server is not None else None)
    finally:
        if server is not None:
            server.stop()
    report(result)
    if args.json:
        write_json(args.json, result, note=False, indent=2)
    passed = result["pass_vs_lock"] and result["pass_floor"] and result["pass_vs_seed"]
    return 0 if passed else 1
