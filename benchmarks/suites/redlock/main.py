"""The Redlock benchmark's run: five private servers unless ``--urls``, the sections asked
for, the report, and the JSON file."""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import secrets
import sys
from importlib.metadata import version
from typing import Any

from harness import config
from harness.report import write_json
from harness.run import Progress, client_environment, interrupt_on_sigterm, load_average
from harness.servers import delete_run_keys, server_name, start_servers

from suites.redlock.config import Config, parse_args, settings
from suites.redlock.contended import bench_contended
from suites.redlock.libs import LIBS
from suites.redlock.paused import bench_paused
from suites.redlock.report import CHECKED, report
from suites.redlock.uncontended import bench_uncontended


def _version(dist: str) -> str:
    try:
        return version(dist)
    except Exception:
        return "not installed"


def _environment(cfg: Config) -> dict[str, Any]:
    """What is known before the first server is asked (its name and the load come later)."""
    env = client_environment()
    return {
        "redis_py": env["redis_py"],
        "pottery": _version("pottery"),
        "aioredlock": _version("aioredlock"),
        "aioredis": _version("aioredis"),
        "hiredis": env["hiredis"],
        "python": env["python"],
        "cpus": env["cpus"],
        "servers": len(cfg.urls),
        "urls": cfg.urls,
        "quick": cfg.quick,
        "server": "?",
        "load_before": "?",
    }


def _run_sections(
    cfg: Config,
    sections: set[str],
    servers: list[Any],
    run_id: str,
    data: dict[str, Any],
    progress: Progress,
) -> None:
    import redis

    ctx = mp.get_context("spawn")
    probe = redis.Redis.from_url(cfg.urls[0], socket_timeout=5)
    info = probe.info("server")
    probe.close()
    data["env"]["server"] = server_name(info)
    data["env"]["load_before"] = load_average()
    if "1" in sections:
        progress.uncontended(data, lambda: bench_uncontended(cfg, run_id), "floor/1")
    if "2" in sections:
        progress.per_size(
            data["contended"],
            cfg.contend_servers,
            cfg.libs,
            lambda lib, n: bench_contended(cfg, ctx, lib, n, run_id),
        )
    if "3" in sections:
        if servers:
            progress.per_library(
                data["paused"], cfg.libs, lambda lib: bench_paused(cfg, ctx, lib, servers, run_id)
            )
        else:
            progress("section 3 skipped: it pauses servers, so it needs servers started here")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    libs = config.pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = config.sections(args.sections)
    contend_servers = config.numbers(args.contend_servers)
    if any(n < 1 or n > 5 for n in contend_servers):
        print("--contend-servers: between 1 and 5", file=sys.stderr)
        return 2
    interrupt_on_sigterm()
    servers: list[Any] = []
    if args.urls:
        urls = [u.strip() for u in args.urls.split(",") if u.strip()]
        if len(urls) < 5:
            print("--urls: five independent servers are needed", file=sys.stderr)
            return 2
        urls = urls[:5]
    else:
        servers = start_servers(5)
        urls = [s.url for s in servers]
    cfg = settings(urls, args.quick, libs, contend_servers, args.why)
    run_id = secrets.token_hex(4)
    data: dict[str, Any] = {
        "env": _environment(cfg),
        "uncontended": {},
        "contended": {},
        "paused": {},
    }
    progress = Progress()

    def body() -> None:
        _run_sections(cfg, sections, servers, run_id, data, progress)

    def cleanup() -> None:
        for server in servers:
            with contextlib.suppress(Exception):
                server.resume()
            with contextlib.suppress(Exception):
                server.stop()
        if not servers:
            for url in urls:
                delete_run_keys(url, run_id)

    if not progress.measure(data, body, cleanup):
        return 130
    failed = report(cfg, data)
    data["failed_targets"] = failed
    data["checked_targets"] = list(CHECKED)
    if args.json:
        write_json(args.json, data)
    return 0
