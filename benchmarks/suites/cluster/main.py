"""The cluster benchmark's run: one private server and a private 3-master + 3-replica cluster,
the sections asked for, the report, and the JSON file."""

from __future__ import annotations

import multiprocessing as mp
import secrets
import sys
from typing import Any

from harness import config
from harness.report import error_text, write_json
from harness.run import Progress, client_environment, interrupt_on_sigterm, load_average
from harness.servers import server_name, topology

from suites.cluster.config import LIBS, TARGET_N, Config, parse_args, settings
from suites.cluster.contended import bench_all_contended
from suites.cluster.report import report
from suites.cluster.uncontended import bench_uncontended
from suites.cluster.waiting import bench_waiting
from suites.handoff.libs import cluster_url, server_probes


def _environment(urls: dict[str, str], cluster: Any) -> dict[str, Any]:
    def name(url: str) -> str:
        probe = server_probes(url)[0]
        try:
            return server_name(probe.info("server"))
        finally:
            probe.close()

    return {
        "server": name(urls["server"]),
        "cluster": name(urls["cluster"]),
        "cluster_nodes": len(cluster.nodes),
        "cluster_startup_s": cluster.startup_seconds or float("nan"),
        **client_environment(),
        "urls": urls,
    }


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
    libs = config.pick_libs(args.libs, LIBS)
    if libs is None:
        return 2
    sections = config.sections(args.sections)
    cfg = settings(args.quick, libs)
    if args.repeats is not None:
        if args.repeats < 1:
            print(f"--repeats must be >= 1, got {args.repeats}", file=sys.stderr)
            return 2
        cfg.repeats = args.repeats
    interrupt_on_sigterm()
    from redlease.server import RedisServer

    progress = Progress()
    data: dict[str, Any] = {
        "env": {},
        "uncontended": {},
        "contended": {},
        "waiting": {},
        "targets": [],
    }
    server = RedisServer()
    cluster = topology().RedisClusterServers(masters=3, replicas_per_master=1)
    load_before = load_average()

    def body() -> None:
        progress("starting one server and a 3-master + 3-replica cluster")
        server.start()
        cluster.start()
        urls = {"server": server.url, "cluster": cluster_url(cluster.nodes[0].url)}
        data["env"] = _environment(urls, cluster)
        data["env"]["load_before"] = load_before
        data["env"]["quick"] = cfg.quick
        _run(cfg, sections, urls, [srv.port for srv in cluster.nodes], data, progress)

    def cleanup() -> None:
        cluster.close()
        server.stop()

    if not progress.measure(data, body, cleanup):
        return 130
    failed = report(cfg, data)
    data["failed_targets"] = failed
    if args.json:
        write_json(args.json, data)
    return 0
