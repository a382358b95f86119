"""Section 1: uncontended acquire+release of redlease's Lock (sync and asyncio) and of the raw
floor, on the server and on the cluster, interleaved: cluster / server."""

from __future__ import annotations

import asyncio
from typing import Any

from harness.locks import CAD_SCRIPT, acquire_release, raw_floor
from harness.report import error_text
from harness.timing import Closers, Op, interleaved_rows

from suites.cluster.config import DIRECT_SUFFIX, DIRECTS, KINDS, Config
from suites.handoff.libs import (
    lease_key,
    make_async_client,
    make_async_lock,
    make_sync_lock,
    sync_client,
)


def _ops(
    urls: dict[str, str],
    run_id: str,
    loop: asyncio.AbstractEventLoop,
    closers: Closers,
    errors: dict[str, str],
) -> dict[str, Op]:
    """Every kind of operation on every topology, keyed ``topology/kind``; each with its own
    sync client, the asyncio ones sharing one client per topology."""
    import redis

    ops: dict[str, Op] = {}
    failure = "uncontended acquire returned False"
    for topo, url in urls.items():
        try:
            sclient = sync_client(url)
            closers.append(sclient.close)
            aclient = loop.run_until_complete(make_async_client(url))
            closers.append(aclient.aclose)
        except Exception as exc:
            for kind in KINDS:
                errors[f"{topo}/{kind}"] = error_text(exc)
            continue
        sha = sclient.script_load(CAD_SCRIPT)  # on a cluster: on every master
        key = f"bench:{run_id}:floor:{topo}"

        ops[f"{topo}/floor"] = raw_floor(sclient, sha, key)
        if topo == "cluster":
            # Diagnostic: the same two commands from a plain redis.Redis straight to the slot's
            # master: the cluster's own cost (replication, more servers), without RedisCluster's.
            node = sclient.get_node_from_key(key)
            direct = redis.Redis(host=node.host, port=node.port)
            closers.append(direct.close)
            ops[f"cluster/floor{DIRECT_SUFFIX}"] = raw_floor(direct, sha, key)
        ops[f"{topo}/floor-async"] = raw_floor(aclient, sha, key + ":a", is_async=True)
        name = f"bench:{run_id}:solo:{topo}"
        lock = make_sync_lock("redlease", sclient, name, 10.0)
        ops[f"{topo}/redlease"] = acquire_release(lock, False, failure)
        if topo == "cluster":
            # Diagnostic: redlease's Lock on a plain redis.Redis to the master of its slot
            # (redlease sees one server): its scripts' cost on a cluster node, without the
            # cluster client path.
            lnode = sclient.get_node_from_key(lease_key("redlease", name + ":d"))
            lclient = redis.Redis(host=lnode.host, port=lnode.port)
            closers.append(lclient.close)
            dlock = make_sync_lock("redlease", lclient, name + ":d", 10.0)
            ops[f"cluster/redlease{DIRECT_SUFFIX}"] = acquire_release(dlock, False, failure)
        alock = make_async_lock("redlease-async", aclient, name + ":a", 10.0)
        ops[f"{topo}/redlease-async"] = acquire_release(alock, True, failure)
    return ops


def bench_uncontended(cfg: Config, urls: dict[str, str], run_id: str) -> dict[str, Any]:
    """Interleaved rounds (the harness's loop): every op on both topologies, order rotated."""

    def build(
        loop: asyncio.AbstractEventLoop, closers: Closers, errors: dict[str, str]
    ) -> dict[str, Op]:
        return _ops(urls, run_id, loop, closers, errors)

    out = interleaved_rows(build, cfg.warm, cfg.iters, cfg.rounds)
    for kind in (*KINDS, *DIRECTS):
        srv = out.get(f"server/{kind.removesuffix(DIRECT_SUFFIX)}", {})
        clu = out.get(f"cluster/{kind}", {})
        if srv.get("p50_us") and clu.get("p50_us"):
            clu["ratio_server"] = clu["p50_us"] / srv["p50_us"]
    return out
