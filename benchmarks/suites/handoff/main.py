"""The hand-off benchmark's run: a private server unless ``--url``, the sections asked for,
the report, and the JSON file."""

from __future__ import annotations

import multiprocessing as mp
import secrets
from typing import Any

from harness import config
from harness.report import write_json
from harness.run import Progress, client_environment, interrupt_on_sigterm, load_average
from harness.servers import delete_run_keys, server_name

from suites.handoff.config import Config, parse_args, settings
from suites.handoff.contended import bench_contended
from suites.handoff.held import bench_crash, bench_waiting
from suites.handoff.libs import LIBS
from suites.handoff.report import report
from suites.handoff.uncontended import bench_uncontended


def _environment(cfg: Config) -> dict[str, Any]:
    import redis

    probe = redis.Redis.from_url(cfg.url)
    info = probe.info("server")
    probe.close()
    return {
        "server": server_name(info),
        **client_environment(),
        "load_before": load_average(),
        "url": cfg.url,
        "quick": cfg.quick,
    }


def _run_sections(
    cfg: Config, sections: set[str], run_id: str, data: dict[str, Any], progress: Progress
) -> None:
    ctx = mp.get_context("spawn")
    if "1" in sections:
        progress.uncontended(data, lambda: bench_uncontended(cfg, run_id), "floor")
    if "2" in sections:
        progress.per_size(
            data["contended"],
            cfg.contend_sizes,
            cfg.libs,
            lambda lib, n: bench_contended(cfg, ctx, lib, n, run_id),
        )
    if "3" in sections:
        progress.per_library(
            data["waiting"], cfg.libs, lambda lib: bench_waiting(cfg, ctx, lib, run_id)
        )
    if "4" in sections:
        progress.per_library(
            data["crash"], cfg.libs, lambda lib: bench_crash(cfg, ctx, lib, run_id)
        )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = config.pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = config.sections(args.sections)
    interrupt_on_sigterm()
    server = None
    url = args.url
    if url is None:
        from redlease.server import RedisServer

        server = RedisServer().start()
        url = server.url
    cfg = settings(url, args.quick, libs)
    if args.sizes:
        cfg.contend_sizes = config.numbers(args.sizes)
    run_id = secrets.token_hex(4)
    data: dict[str, Any] = {
        "env": _environment(cfg),
        "uncontended": {},
        "contended": {},
        "waiting": {},
        "crash": {},
    }
    progress = Progress()

    def cleanup() -> None:
        if server is not None:
            server.stop()
        else:
            delete_run_keys(url, run_id)

    def body() -> None:
        _run_sections(cfg, sections, run_id, data, progress)

    if not progress.measure(data, body, cleanup):
        return 130
    failed = report(cfg, data)
    data["failed_targets"] = failed
    if args.json:
        write_json(args.json, data)
    return 0
