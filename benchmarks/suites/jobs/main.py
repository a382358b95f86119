"""The jobs benchmark's run: the sections whose framework imports, their rows measured in one
set of interleaved rounds, and the table."""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import inspect
import sys
from collections.abc import Callable
from typing import Any

import redis
from harness import config
from harness.report import error_text, fmt, print_section, print_table, write_json
from harness.run import client_environment, load_average
from harness.servers import server_name, url_or_private
from harness.timing import close_loop

import redlease
from suites.jobs.measure import Row, async_pool, figures, measure, sync_client

# section: (module of suites.jobs, what it needs, the client it takes: sync or asyncio)
SECTIONS = {
    "apscheduler": ("aps", "apscheduler", "sync"),
    "beat": ("beat", "celery", "sync"),
    "rq": ("rq_rows", "rq", "sync"),
    "arq": ("arq_rows", "arq", "async"),
}
REFERENCE = "reference"


def reference_rows(client: redis.Redis) -> list[Row]:
    """One round trip (PING) and a ``Lock`` acquire + release: the units to read the rest by."""
    lock = redlease.Lock(client, "bench:lock", renew=False, prefix="bench")

    def lock_step() -> None:
        lock.acquire()
        lock.release()

    return [
        Row(REFERENCE, "PING", client.ping),
        Row(REFERENCE, "Lock acquire + release", lock_step),
    ]


def build(
    url: str, wanted: set[str], closers: list[Callable[[], Any]]
) -> tuple[list[Row], dict[str, str]]:
    """The rows of every wanted section that can run here; why the others cannot."""
    client = sync_client(url)
    pool = async_pool(url)
    closers.extend([client.close, pool.disconnect])
    rows = reference_rows(client)
    skipped: dict[str, str] = {}
    for name, (module, package, kind) in SECTIONS.items():
        if name not in wanted:
            continue
        try:
            importlib.import_module(package)
        except ImportError as exc:
            skipped[name] = f"not run: {package} is not installed here ({exc})"
            continue
        try:
            section = importlib.import_module(f"suites.jobs.{module}")
            rows += section.rows(client if kind == "sync" else pool, closers)
        except Exception as exc:
            skipped[name] = f"ERROR: {error_text(exc)}"
    return rows, skipped


def run(url: str, args: Any) -> dict[str, Any]:
    probe = redis.Redis.from_url(url)
    data: dict[str, Any] = {"env": client_environment(), "rows": {}, "skipped": {}}
    data["env"].update(server=server_name(probe.info("server")), load_before=load_average())
    data["env"].update(calls=args.calls, rounds=args.rounds)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    closers: list[Callable[[], Any]] = []
    errors: dict[str, str] = {}
    try:
        rows, data["skipped"] = build(url, config.sections(args.sections), closers)
        measure(loop, rows, probe, args.calls, args.rounds, args.warm, errors)
        data["rows"] = {row.key: figures(row) for row in rows}
        data["bare"] = {row.key: f"{row.section}: {row.bare}" for row in rows if row.bare}
        data["errors"] = errors
    finally:
        for close in reversed(closers):
            with contextlib.suppress(Exception):
                result = close()
                if inspect.isawaitable(result):
                    loop.run_until_complete(asyncio.wait_for(result, 5))
        close_loop(loop)
        redlease.close(probe)
        probe.close()
    data["env"]["load_after"] = load_average()
    return data


def report(data: dict[str, Any]) -> None:
    env = data["env"]
    print(
        f"jobs glue per fire/enqueue vs the bare path: {env['server']}, redis-py {env['redis_py']}"
        f", Python {env['python']}; {env['rounds']} rounds x {env['calls']} calls per row;"
        f" load {env['load_before']} -> {env['load_after']}"
    )
    headers = ["row", "p50 us", "p99 us", "x bare", "+ us", "round trips", "commands"]
    sections: dict[str, list[list[str]]] = {}
    for key, row in data["rows"].items():
        section, label = key.split(": ", 1)
        bare = data["rows"].get(data["bare"].get(key, ""))
        ratio = added = None
        if bare is not None:
            ratio = row["p50_us"] / bare["p50_us"] if bare["p50_us"] else float("nan")
            added = row["p50_us"] - bare["p50_us"]
        sections.setdefault(section, []).append(
            [
                label,
                fmt(row["p50_us"], ".1f"),
                fmt(row["p99_us"], ".1f"),
                fmt(ratio, ".1f"),
                fmt(added, "+.1f"),
                fmt(row["round_trips"], ".2f"),
                fmt(row["commands"], ".2f"),
            ]
        )
    for key, error in data["errors"].items():
        section, label = key.split(": ", 1)
        sections.setdefault(section, []).append([label, f"ERROR: {error}"])
    for section, rows in sections.items():
        print_section(section)
        print_table(headers, rows, indent="  ")
    for name, why in data["skipped"].items():
        print_section(f"{name}: {why}")


def main(doc: str | None) -> int:
    parser = config.parser(doc)
    config.add_url(parser, "a scratch server of yours (default: a private one); keys are left")
    config.add_quick(parser, "smoke run: 2 rounds of 50 calls (a few seconds)")
    config.add_json(parser)
    config.add_sections(parser, ",".join(SECTIONS))
    parser.add_argument("--calls", type=int, default=500, help="calls per row and round")
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()
    args.warm = 50
    if args.quick:
        args.calls, args.rounds, args.warm = 50, 2, 5
    with url_or_private(args.url) as url:
        data = run(url, args)
    report(data)
    if args.json:
        write_json(args.json, data)
    return (
        1 if data["errors"] or any(w.startswith("ERROR") for w in data["skipped"].values()) else 0
    )


if __name__ == "__main__":
    sys.exit(main(__doc__))
