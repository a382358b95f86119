"""Section 1: uncontended acquire+release of every library, interleaved with the raw floors
(``SET NX PX`` + ``EVALSHA`` compare-and-delete with plain redis-py, sync and asyncio)."""

from __future__ import annotations

import asyncio
import secrets
from typing import Any

from harness.locks import CAD_SCRIPT, acquire_release, raw_floor
from harness.report import error_text
from harness.timing import Closers, Op, interleaved_rows

from suites.handoff.config import Config
from suites.handoff.libs import (
    ASYNC_LIBS,
    DIAG_NORENEW,
    make_async_client,
    make_async_lock,
    make_sync_lock,
)


def _floor_ops(cfg: Config, run_id: str, aclient: Any, closers: Closers) -> dict[str, Op]:
    """The raw floors, sync and asyncio: SET NX PX of a random token, EVALSHA compare-and-delete."""
    import redis

    base = redis.Redis.from_url(cfg.url)
    sha = base.script_load(CAD_SCRIPT)
    base.close()

    r = redis.Redis.from_url(cfg.url)
    closers.append(r.close)

    # The kept-connection floors: the same two commands on one connection taken from a pool
    # once (send, then read; no pool checkout per call).
    from redlease._redispy_versions import AsyncConnections, Connections

    kconn = Connections.get(r.connection_pool)
    closers.insert(0, lambda: r.connection_pool.release(kconn))
    kkey = f"bench:{run_id}:kept"

    def kept() -> None:
        token = secrets.token_hex(16)
        kconn.send_command("SET", kkey, token, "NX", "PX", 10000)
        kconn.read_response()
        kconn.send_command("EVALSHA", sha, 1, kkey, token)
        kconn.read_response()

    akconn: list[Any] = []
    akkey = f"bench:{run_id}:akept"

    async def akept() -> None:
        if not akconn:
            akconn.append(await AsyncConnections.get(aclient.connection_pool))
        conn = akconn[0]
        token = secrets.token_hex(16)
        await conn.send_command("SET", akkey, token, "NX", "PX", 10000)
        await conn.read_response()
        await conn.send_command("EVALSHA", sha, 1, akkey, token)
        await conn.read_response()

    return {
        "floor": raw_floor(r, sha, f"bench:{run_id}:floor"),
        "floor-async": raw_floor(aclient, sha, f"bench:{run_id}:afloor", is_async=True),
        "kept": (False, kept),
        "kept-async": (True, akept),
    }


def _lock_ops(
    cfg: Config, run_id: str, aclient: Any, closers: Closers, errors: dict[str, str]
) -> dict[str, Op]:
    """One acquire+release per library (sync ones on a client each, asyncio ones on one), and
    the diagnostic redlease row without its watchdog."""
    import redis

    ops: dict[str, Op] = {}
    failure = "uncontended acquire returned False"
    for lib in cfg.libs:
        name = f"bench:{run_id}:solo:{lib}"
        try:
            if lib in ASYNC_LIBS:
                ops[lib] = acquire_release(make_async_lock(lib, aclient, name, 10.0), True, failure)
            else:
                client = redis.Redis.from_url(cfg.url)
                closers.append(client.close)
                ops[lib] = acquire_release(make_sync_lock(lib, client, name, 10.0), False, failure)
        except Exception as exc:
            errors[lib] = error_text(exc)
    if "redlease" in cfg.libs:
        # Diagnostic, not a default: the same lock without the watchdog (own client, so no
        # renewer thread exists in its runtime). The gap to the default row is the watchdog's.
        try:
            import redlease

            client = redis.Redis.from_url(cfg.url)
            closers.append(client.close)
            dlock = redlease.Lock(client, f"bench:{run_id}:solo:norenew", ttl=10.0, renew=False)
            ops[DIAG_NORENEW] = acquire_release(dlock, False, failure)
        except Exception as exc:
            errors[DIAG_NORENEW] = error_text(exc)
    return ops


def _add_floor_ratios(out: dict[str, Any]) -> None:
    """Every row's p50 over the sync floor's, and over the asyncio floor's."""
    floor_p50 = out.get("floor", {}).get("p50_us")
    afloor_p50 = out.get("floor-async", {}).get("p50_us")
    for row in out.values():
        if "error" in row:
            continue
        if floor_p50:
            row["ratio_floor"] = row["p50_us"] / floor_p50
        if afloor_p50:
            row["ratio_floor_async"] = row["p50_us"] / afloor_p50
        for kept in ("kept", "kept-async"):
            kept_p50 = out.get(kept, {}).get("p50_us")
            if kept_p50:
                row[f"ratio_{kept.replace('-', '_')}"] = row["p50_us"] / kept_p50


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Interleaved rounds so that the machine's noise hits every library alike."""

    def build(
        loop: asyncio.AbstractEventLoop, closers: Closers, errors: dict[str, str]
    ) -> dict[str, Op]:
        aclient = loop.run_until_complete(make_async_client(cfg.url))
        closers.append(aclient.aclose)
        return {
            **_floor_ops(cfg, run_id, aclient, closers),
            **_lock_ops(cfg, run_id, aclient, closers, errors),
        }

    out = interleaved_rows(build, cfg.warm, cfg.iters, cfg.rounds)
    _add_floor_ratios(out)
    return out
