"""Section 1: uncontended acquire+release of redlease's Lock (sync and asyncio) and of the raw
floor, on the server and on the cluster, interleaved: cluster / server."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Callable
from typing import Any

from harness.locks import CAD_SCRIPT, acquire_release, close_loop
from harness.report import error_text
from harness.timing import Op, latency_rows, time_interleaved

from suites.cluster.config import DIRECT_SUFFIX, DIRECTS, KINDS, Config
from suites.handoff.libs import (
    lease_key,
    make_async_client,
    make_async_lock,
    make_sync_lock,
    sync_client,
)


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
            sclient = sync_client(url)
            closers.append(sclient.close)
            aclient = loop.run_until_complete(make_async_client(url))
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
    return ops, errors


def bench_uncontended(cfg: Config, urls: dict[str, str], run_id: str) -> dict[str, Any]:
    """Interleaved rounds (py's loop): every op on both topologies, order rotated."""
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
