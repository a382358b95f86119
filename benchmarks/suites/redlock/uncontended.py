"""Section 1: uncontended acquire+release over 1 and 5 servers, interleaved with the floors:
the do-nothing Redlock (sync and asyncio), ``redis.asyncio`` with gather, and redlease's own
scripts on the do-nothing fan-out."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable, Sequence
from typing import Any

from harness.locks import CAD_SCRIPT, acquire_release
from harness.report import error_text
from harness.timing import Closers, Op, interleaved_rows

from suites.redlock.config import Config
from suites.redlock.libs import ASYNC_LIBS, FLOORS, NOTHING, SIZES, TTL, Backend


def _floor_ops(
    cfg: Config, run_id: str, loop: asyncio.AbstractEventLoop, closers: Closers
) -> dict[str, Op]:
    """The raw fan-out floors over 1 and 5 servers: SET NX PX on every server (write all,
    then read all), then EVALSHA compare-and-delete the same way; and the same with
    redis.asyncio and gather."""
    import redis

    sha = ""
    for url in cfg.urls[: max(SIZES)]:
        probe = redis.Redis.from_url(url)
        sha = probe.script_load(CAD_SCRIPT)
        probe.close()

    ops: dict[str, Op] = {}
    for n in SIZES:
        clients = [redis.Redis.from_url(u) for u in cfg.urls[:n]]
        closers.extend(c.close for c in clients)
        conns = [c.connection_pool.get_connection() for c in clients]
        key = f"bench:{run_id}:floor:{n}"

        def floor(conns: list[Any] = conns, key: str = key) -> None:
            token = secrets.token_hex(16)
            for conn in conns:
                conn.send_command("SET", key, token, "NX", "PX", int(TTL * 1000))
            for conn in conns:
                conn.read_response()
            for conn in conns:
                conn.send_command("EVALSHA", sha, 1, key, token)
            for conn in conns:
                conn.read_response()

        ops[f"floor/{n}"] = (False, floor)

        aclients = loop.run_until_complete(_async_clients(cfg.urls[:n]))
        closers.extend(c.aclose for c in aclients)
        akey = f"bench:{run_id}:afloor:{n}"

        async def afloor(aclients: list[Any] = aclients, akey: str = akey) -> None:
            token = secrets.token_hex(16)
            await asyncio.gather(
                *(c.set(akey, token, nx=True, px=int(TTL * 1000)) for c in aclients)
            )
            await asyncio.gather(*(c.evalsha(sha, 1, akey, token) for c in aclients))

        ops[f"floor-async/{n}"] = (True, afloor)

        aconns = loop.run_until_complete(_async_conns(aclients))
        nkey = f"bench:{run_id}:nothing:{n}"

        async def nothing(aconns: list[Any] = aconns, nkey: str = nkey) -> None:
            token = secrets.token_hex(16)
            for conn in aconns:
                await conn.send_command("SET", nkey, token, "NX", "PX", int(TTL * 1000))
            for conn in aconns:
                await conn.read_response()
            for conn in aconns:
                await conn.send_command("EVALSHA", sha, 1, nkey, token)
            for conn in aconns:
                await conn.read_response()

        ops[f"nothing-async/{n}"] = (True, nothing)
        ops[f"scripts/{n}"] = (False, _scripts_op(clients, run_id, n))
    return ops


async def _async_conns(aclients: list[Any]) -> list[Any]:
    """One connection per asyncio client, checked out once and kept."""
    return [await c.connection_pool.get_connection() for c in aclients]


def _scripts_op(clients: list[Any], run_id: str, n: int) -> Callable[[], None]:
    """redlease's own Redlock acquire and release scripts (reservation mode, as Redlock
    sends them) on one kept connection per server, write all then read: what the lock's
    server-side work costs, with no client logic around it."""
    from redlease._core.lock import ACQUIRE_RESERVING, RELEASE, LockKeys
    from redlease._core.waiters import WAITERS

    for c in clients:
        c.script_load(ACQUIRE_RESERVING.source)
        c.script_load(RELEASE.source)
    conns = [c.connection_pool.get_connection() for c in clients]
    keys = LockKeys.build("bench", f"{run_id}:scripts:{n}".encode())
    lock_keys = keys.in_order()
    ttl_ms = int(TTL * 1000)

    def scripts() -> None:
        token = secrets.token_hex(16).encode()
        acquire = (token, ttl_ms, 0, 50, WAITERS, "", "1")  # score: the server's time; tell
        for conn in conns:
            conn.send_command("EVALSHA", ACQUIRE_RESERVING.sha, 4, *lock_keys, *acquire)
        for conn in conns:
            conn.read_response()
        for i, conn in enumerate(conns):
            tell = "1" if i < n - (n // 2 + 1) + 1 else "0"
            conn.send_command(
                "EVALSHA", RELEASE.sha, 4, *lock_keys, token, 50, WAITERS, "R", 0, tell
            )
        for conn in conns:
            conn.read_response()

    return scripts


def _lock_ops(
    cfg: Config,
    run_id: str,
    loop: asyncio.AbstractEventLoop,
    closers: Closers,
    errors: dict[str, str],
) -> dict[str, Op]:
    """One acquire+release per library over 1 and over 5 servers, a backend each."""
    ops: dict[str, Op] = {}
    failure = "uncontended acquire failed"
    for lib in cfg.libs:
        for n in SIZES:
            key = f"{lib}/{n}"
            name = f"bench:{run_id}:solo:{lib}:{n}"
            try:
                if lib in ASYNC_LIBS:
                    backend = loop.run_until_complete(Backend.open_async(lib, cfg.urls[:n]))
                    closers.append(backend.aclose)
                    ops[key] = acquire_release(backend.lock(name), True, failure)
                else:
                    backend = Backend(lib, cfg.urls[:n])
                    closers.append(backend.close)
                    ops[key] = acquire_release(backend.lock(name), False, failure)
            except Exception as exc:
                errors[key] = error_text(exc)
    return ops


def _add_ratios(cfg: Config, out: dict[str, Any]) -> None:
    """scaling: p50 over 5 servers / p50 over 1; ratio_floor: p50 / the floor's of the same
    kind and N; scaling_over_floor: the scaling / the floor's scaling."""
    lo, hi = min(SIZES), max(SIZES)
    for base in [*FLOORS, *cfg.libs]:
        a, b = out.get(f"{base}/{lo}", {}), out.get(f"{base}/{hi}", {})
        if a.get("p50_us") and b.get("p50_us"):
            b["scaling"] = b["p50_us"] / a["p50_us"]
    for n in SIZES:  # the scripts row against the sync do-nothing Redlock
        row, floor_row = out.get(f"scripts/{n}", {}), out.get(f"floor/{n}", {})
        if row.get("p50_us") and floor_row.get("p50_us"):
            row["ratio_nothing"] = row["p50_us"] / floor_row["p50_us"]
    for lib in cfg.libs:
        floor_kind = "floor-async" if lib in ASYNC_LIBS else "floor"
        nothing_kind = NOTHING[lib in ASYNC_LIBS]
        for n in SIZES:
            row, floor_row = out.get(f"{lib}/{n}", {}), out.get(f"{floor_kind}/{n}", {})
            if row.get("p50_us") and floor_row.get("p50_us"):
                row["ratio_floor"] = row["p50_us"] / floor_row["p50_us"]
            nothing_row = out.get(f"{nothing_kind}/{n}", {})
            if row.get("p50_us") and nothing_row.get("p50_us"):
                row["ratio_nothing"] = row["p50_us"] / nothing_row["p50_us"]
        row, floor_row = out.get(f"{lib}/{hi}", {}), out.get(f"{floor_kind}/{hi}", {})
        if row.get("scaling") and floor_row.get("scaling"):
            row["scaling_over_floor"] = row["scaling"] / floor_row["scaling"]


def bench_uncontended(cfg: Config, run_id: str) -> dict[str, Any]:
    """Every (library, N) row and the floors, interleaved so that load bursts hit all alike."""

    def build(
        loop: asyncio.AbstractEventLoop, closers: Closers, errors: dict[str, str]
    ) -> dict[str, Op]:
        return {
            **_floor_ops(cfg, run_id, loop, closers),
            **_lock_ops(cfg, run_id, loop, closers, errors),
        }

    out = interleaved_rows(build, cfg.warm, cfg.iters, cfg.rounds, async_timeout=30)
    _add_ratios(cfg, out)
    return out


async def _async_clients(urls: Sequence[str]) -> list[Any]:
    import redis.asyncio

    return [redis.asyncio.Redis.from_url(u) for u in urls]
