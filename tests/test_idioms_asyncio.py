"""The idioms suite's asyncio part: Lock, RLock, Semaphore and ReadWriteLock handles taken
through ``wait_for``, ``asyncio.timeout``, ``gather``, ``create_task``, ``shield`` and
cancellation, mixed at random against one server (what runs and what is checked:
tests/idioms.py)."""

from __future__ import annotations

import asyncio
import gc
import random
import sys
import time
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease.asyncio as aredlease
from tests.idioms import (
    DROP_TTL,
    ENTER,
    KINDS,
    LIMIT,
    RUN,
    SEED,
    SLACK,
    SLOW,
    TTL,
    Tally,
    async_handle,
    check_end,
    checker_of,
    kill_connections,
    lock_key,
    names,
    report,
    worker_clients,
)

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("frozen_heap")]


# -- asyncio ---------------------------------------------------------------------------------


async def take(handle: Any, idiom: str, rng: random.Random) -> bool:
    """Acquire ``handle`` through ``idiom``; True if this code now holds it."""
    if idiom == "wait_for":
        return bool(await asyncio.wait_for(handle.acquire(), rng.choice([0.005, 0.05, 0.5])))
    if idiom == "timeout" and sys.version_info >= (3, 11):
        async with asyncio.timeout(rng.choice([0.01, 0.1, 1.0])):
            return bool(await handle.acquire())
    if idiom == "gather":
        [got] = await asyncio.gather(handle.acquire(timeout=1.0))
        return bool(got)
    if idiom == "create_task":
        return bool(await asyncio.create_task(handle.acquire(timeout=1.0)))
    if idiom == "shield":
        return bool(await asyncio.shield(handle.acquire(timeout=1.0)))
    if idiom == "cancel":
        task = asyncio.create_task(handle.acquire(timeout=1.0))
        await asyncio.sleep(rng.uniform(0.0, 0.03))
        task.cancel()
        try:
            return bool(await task)
        except asyncio.CancelledError:
            return False
    return bool(await handle.acquire(timeout=1.0))


ASYNC_IDIOMS = ("plain", "wait_for", "timeout", "gather", "create_task", "shield", "cancel")
SAME_TASK = ("plain", "timeout")  # the acquire ran in the awaiting task itself


async def async_section(checker: Any, kind: str, handle: Any, idiom: str, tally: Tally) -> None:
    _, side, other = names(kind, "asyncio")
    violations = f"idioms:{SEED}:asyncio:violations"
    await checker.eval(ENTER, 3, side, other, violations, LIMIT[kind])
    try:
        if kind == "lock":
            tally.fences.append(handle.fence)
        if kind == "rlock" and idiom in SAME_TASK:  # re-entry stays per task
            try:
                reentered = await handle.acquire(timeout=1.0)  # (it refreshes the lease)
            except aredlease.Unavailable:
                tally.count("re-entry: Unavailable")
            except aredlease.LockLost:  # across a kill, as a release may find it
                tally.count("re-entry: lost")
            else:
                assert reentered
                await handle.release()
        await asyncio.sleep(random.uniform(0.0, 0.01))
    finally:
        await checker.decr(side)
        tally.sections += 1


async def async_worker(
    client: Any, checker: Any, kind: str, n: int, end: float, tally: Tally
) -> None:
    rng = random.Random(f"{SEED}:{kind}:{n}")
    name = names(kind, "asyncio")[0]
    while time.monotonic() < end:
        idiom = rng.choice(ASYNC_IDIOMS)
        handle = async_handle(client, kind, name, TTL)
        try:
            got = await take(handle, idiom, rng)
        except (asyncio.TimeoutError, aredlease.Unavailable) as exc:
            tally.count(f"{idiom}: {type(exc).__name__}")
            continue
        if not got:
            continue
        tally.count(idiom)
        try:
            await async_section(checker, kind, handle, idiom, tally)
        finally:
            try:
                await handle.release()
            except aredlease.Unavailable:
                tally.count("release: Unavailable")
            except (aredlease.LockLost, aredlease.PermitLost):
                # A lease lost across a killed connection: the safe outcome, which the
                # exclusion check covers (no other holder may have been let in meanwhile).
                tally.count("release: lost")
            except aredlease.RedleaseError as exc:
                tally.failed(f"{kind} via {idiom}: {type(exc).__name__}: {exc}")


async def async_dropper(client: Any, end: float, tally: Tally) -> None:
    """Handles taken through the idioms and dropped without release()."""
    rng = random.Random(f"{SEED}:drop")
    i = 0
    while time.monotonic() < end - 0.5:
        kind = KINDS[i % len(KINDS)]
        name = f"idioms:{SEED}:asyncio:drop:{i}"
        handle = async_handle(client, kind, name, DROP_TTL)
        try:
            got = await take(handle, rng.choice(("plain", "wait_for", "create_task")), rng)
        except (asyncio.TimeoutError, aredlease.Unavailable):
            got = False
        if got:
            tally.dropped.append((f"{kind}:{name}", time.monotonic()))
        del handle
        gc.collect()
        i += 1
        await asyncio.sleep(rng.uniform(0.1, 0.4))


async def async_victim(client: Any, checker: Any, end: float, tally: Tally) -> None:
    """A lock taken away from its holder, whose on_lost is slow (SLOW s, longer than TTL),
    while another is held all along: it must keep its lease."""
    keeper = aredlease.Lock(client, f"idioms:{SEED}:asyncio:keeper", ttl=TTL)
    assert await keeper.acquire(timeout=5)
    told = asyncio.Event()

    async def slow_on_lost() -> None:
        told.set()
        await asyncio.sleep(SLOW)

    name = f"idioms:{SEED}:asyncio:victim"
    victim = aredlease.Lock(client, name, ttl=1.0, on_lost=slow_on_lost)
    assert await victim.acquire(timeout=5)
    await checker.delete(lock_key(name))  # stolen: the next renewal sees it
    await asyncio.wait_for(told.wait(), 10)
    tally.count("slow on_lost")
    await asyncio.sleep(max(end - time.monotonic(), SLOW))
    await release_kept(keeper, tally)


async def release_kept(keeper: Any, tally: Tally) -> None:
    """Release the lock held all along: lost is a failure (an outage is not, it may be)."""
    for _ in range(3):  # a connection the killer closed fails the call that reuses it
        try:
            await keeper.release()
            return
        except aredlease.Unavailable:
            if not await keeper.owned():
                return
        except aredlease.LockLost as exc:
            tally.failed(f"the lock held all along: {exc}")
            return


async def async_killer(admin: redis.Redis, end: float, tally: Tally) -> None:
    rng = random.Random(f"{SEED}:kill")
    while time.monotonic() < end:
        await asyncio.sleep(rng.uniform(0.5, 1.0))
        await asyncio.to_thread(kill_connections, admin, rng, tally)


async def leases_end(client: Any, tally: Tally) -> None:
    """A new handle gets each dropped handle's name within its ttl (and the slack), and every
    name of the run (both permits, a writer) within TTL: a failed release's lease ran out."""
    ended = time.monotonic()
    checks = [(label, at, DROP_TTL) for label, at in tally.dropped]
    for kind in ("lock", "rlock", "semaphore", "semaphore", "write"):
        checks.append((f"{kind}:{names(kind, 'asyncio')[0]}", ended, TTL))
    held = []
    for label, since, ttl in checks:
        kind, name = label.split(":", 1)
        handle = async_handle(client, checker_of(kind), name, ttl)
        for _ in range(3):  # a connection the killer closed fails the call that reuses it
            try:
                if await handle.acquire(timeout=max(since + ttl + SLACK - time.monotonic(), 0.1)):
                    held.append(handle)
                    break
            except aredlease.Unavailable:
                continue
        else:
            tally.failed(f"{label} still held {ttl + SLACK:.1f} s after its handle was gone")
    for handle in held:
        await handle.release()


def test_asyncio_idioms(make_server: Any) -> None:
    srv = make_server()
    admin, checker_sync = worker_clients(srv)
    tally = Tally()

    async def main() -> set[str]:
        client = redis.asyncio.Redis(
            host=srv.host, port=srv.port, client_name="idioms-worker", socket_timeout=2.0
        )
        checker = redis.asyncio.Redis(host=srv.host, port=srv.port, client_name="idioms-checker")
        end = time.monotonic() + RUN
        jobs = [
            async_worker(client, checker, kind, n, end, tally) for kind in KINDS for n in (0, 1)
        ]
        jobs += [async_dropper(client, end, tally), async_victim(client, checker, end, tally)]
        jobs.append(async_killer(admin, end, tally))
        await asyncio.gather(*jobs)
        await leases_end(client, tally)
        await aredlease.close(client)
        await client.aclose()
        await checker.aclose()
        for _ in range(150):  # bounded: what close() ended has ended
            if len(asyncio.all_tasks()) <= 1:
                break
            await asyncio.sleep(0.02)
        return {t.get_name() for t in asyncio.all_tasks() if t is not asyncio.current_task()}

    left = asyncio.run(main())
    assert not left, f"tasks left behind: {left} ({report('asyncio', tally)})"
    check_end(checker_sync, "asyncio", tally)
    admin.close()
    checker_sync.close()
