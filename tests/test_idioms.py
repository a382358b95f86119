"""The idioms suite: the code users really write, mixed at random against one server.

Seeded (``REDLEASE_IDIOMS_SEED`` replays a run; the seed is printed) and bounded (a few seconds
of traffic per part). Workers take Lock, RLock, Semaphore and ReadWriteLock handles through
the idioms of issue 23: asyncio ``wait_for`` with short timeouts, ``asyncio.timeout``,
``gather``, ``create_task``, ``shield`` and cancellation (the lock is released by the code that
awaited it); threads sharing handles; ``fork`` while holding (the child owns nothing); while
connections are killed (``CLIENT KILL``) and a slow ``on_lost`` runs. Checked:

* exclusion: each critical section enters and leaves through a script on the server that
  counts the holders of each name (and the other side, for a ReadWriteLock), and the fences of
  a Lock's successive holders strictly increase;
* no lease outlives its handle: a handle dropped without ``release()`` stops being renewed,
  and a new handle gets the name within the ttl;
* no lease is lost meanwhile (none of these locks is ever stolen), and nothing is left
  behind: no redlease thread or task after ``close()``, every name free at the end.
"""

from __future__ import annotations

import asyncio
import gc
import os
import random
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease.asyncio as aredlease
from redlease.server import RedisServer
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
    sync_handle,
    sync_taken,
    wait_child,
    worker_clients,
)

pytestmark = pytest.mark.timeout(120)

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


# -- threads and fork ------------------------------------------------------------------------


def sync_section(checker: redis.Redis, kind: str, handle: Any, tally: Tally) -> None:
    _, side, other = names(kind, "threads")
    checker.eval(ENTER, 3, side, other, f"idioms:{SEED}:threads:violations", LIMIT[kind])
    try:
        if kind == "lock":
            with tally.guard:
                tally.fences.append(handle.fence)
        if kind == "rlock":
            try:
                reentered = handle.acquire(timeout=1.0)  # (it refreshes the lease)
            except redlease.Unavailable:
                tally.count("re-entry: Unavailable")
            else:
                assert reentered
                handle.release()
        time.sleep(random.uniform(0.0, 0.01))
    finally:
        checker.decr(side)
        with tally.guard:
            tally.sections += 1


def sync_worker(
    client: Any, checker: redis.Redis, kind: str, n: int, shared: Any, end: float, tally: Tally
) -> None:
    """``shared``: a handle this thread shares with another (each thread owns its own hold)."""
    rng = random.Random(f"{SEED}:{kind}:{n}")
    name = names(kind, "threads")[0]
    while time.monotonic() < end:
        handle = shared if shared is not None else sync_handle(client, kind, name, TTL)
        timeout = rng.choice([0.0, 0.01, 0.2, 1.0])
        try:
            got = handle.acquire(timeout=timeout)
        except redlease.Unavailable as exc:
            tally.count(f"acquire: {type(exc).__name__}")
            continue
        if not got:
            continue
        tally.count("shared handle" if shared is not None else "own handle")
        try:
            sync_section(checker, kind, handle, tally)
        finally:
            try:
                handle.release()
            except redlease.Unavailable:
                tally.count("release: Unavailable")
            except (redlease.LockLost, redlease.PermitLost):  # across a kill: as above
                tally.count("release: lost")
            except redlease.RedleaseError as exc:
                tally.failed(f"{kind}: {type(exc).__name__}: {exc}")


def forked_child(lock: Any, srv: RedisServer) -> int:
    """In the child of a holder: it owns nothing; its release does not touch the parent's
    lease; it can still use locks of its own. The exit status says what went wrong."""
    try:
        if lock.owned() or lock.fence is not None:
            return 2
        try:
            lock.release()
            return 3  # released the parent's lock
        except redlease.LockNotOwned:
            pass
        client = redis.Redis(host=srv.host, port=srv.port, client_name="idioms-child")
        mine = redlease.Lock(client, lock.name + ":child", ttl=TTL)
        if not mine.acquire(timeout=5):
            return 4
        mine.release()
        redlease.close(client)
        client.close()
        return 0
    except BaseException:
        return 5


def sync_forker(client: Any, srv: RedisServer, end: float, tally: Tally) -> None:
    """Fork while holding a lock; the parent must still hold it after the child is done."""
    rng = random.Random(f"{SEED}:fork")
    name = f"idioms:{SEED}:threads:forked"
    while time.monotonic() < end - 1.0:
        lock = redlease.Lock(client, name, ttl=TTL)
        try:
            if not lock.acquire(timeout=1.0):
                continue
        except redlease.Unavailable:
            continue
        with warnings.catch_warnings():  # (3.12+: fork in a process with threads)
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
        if pid == 0:
            os._exit(forked_child(lock, srv))
        status = wait_child(pid)
        tally.count("fork")
        if status != 0:
            tally.failed(f"forked child exit status {status}")
        try:
            if not lock.owned():
                tally.failed("the parent lost its lock to its child")
            lock.release()
        except redlease.Unavailable:
            tally.count("release: Unavailable")
        except redlease.RedleaseError as exc:
            tally.failed(f"forked lock: {type(exc).__name__}: {exc}")
        time.sleep(rng.uniform(0.1, 0.4))


def sync_dropper(client: Any, end: float, tally: Tally) -> None:
    """Threads that take a handle and end without release()."""
    rng = random.Random(f"{SEED}:drop")
    i = 0
    while time.monotonic() < end - 0.5:
        kind = KINDS[i % len(KINDS)]
        name = f"idioms:{SEED}:threads:drop:{i}"

        def take_and_drop(kind: str = kind, name: str = name) -> None:
            handle = sync_handle(client, kind, name, DROP_TTL)
            try:
                if handle.acquire(timeout=1.0):
                    tally.dropped.append((f"{kind}:{name}", time.monotonic()))
            except redlease.Unavailable:
                pass

        thread = threading.Thread(target=take_and_drop, name="idioms-dropper")
        thread.start()
        thread.join(10)
        gc.collect()
        i += 1
        time.sleep(rng.uniform(0.1, 0.4))


def sync_victim(client: Any, checker: redis.Redis, end: float, tally: Tally) -> None:
    keeper = redlease.Lock(client, f"idioms:{SEED}:threads:keeper", ttl=TTL)  # held all along
    assert keeper.acquire(timeout=5)
    told = threading.Event()

    def slow_on_lost() -> None:
        told.set()
        time.sleep(SLOW)  # blocks: with it on the watchdog, the TTL locks would be lost

    name = f"idioms:{SEED}:threads:victim"
    victim = redlease.Lock(client, name, ttl=1.0, on_lost=slow_on_lost)
    assert victim.acquire(timeout=5)
    checker.delete(lock_key(name))
    if told.wait(10):
        tally.count("slow on_lost")
    else:
        tally.failed("the victim's on_lost was never called")
    time.sleep(max(end - time.monotonic(), SLOW))
    try:
        keeper.release()
    except redlease.Unavailable:
        pass  # (its lease runs out)
    except redlease.LockLost as exc:
        tally.failed(f"the lock held all along: {exc}")


def sync_killer(admin: redis.Redis, end: float, tally: Tally) -> None:
    rng = random.Random(f"{SEED}:kill")
    while time.monotonic() < end:
        time.sleep(rng.uniform(0.5, 1.0))
        kill_connections(admin, rng, tally)


def test_thread_and_fork_idioms(make_server: Any) -> None:
    if not hasattr(os, "fork"):
        pytest.skip("no fork here")
    srv = make_server()
    admin, checker = worker_clients(srv)
    before = set(threading.enumerate())
    client = redis.Redis(
        host=srv.host, port=srv.port, client_name="idioms-worker", socket_timeout=2.0
    )
    tally = Tally()
    end = time.monotonic() + RUN
    jobs: list[Callable[[], None]] = []
    for kind in KINDS:
        shared = sync_handle(client, kind, names(kind, "threads")[0], TTL)
        for n, handle in enumerate((shared, shared, None)):  # two threads share one handle
            jobs.append(
                lambda k=kind, n=n, h=handle: sync_worker(client, checker, k, n, h, end, tally)
            )
    jobs += [
        lambda: sync_forker(client, srv, end, tally),
        lambda: sync_dropper(client, end, tally),
        lambda: sync_victim(client, checker, end, tally),
        lambda: sync_killer(admin, end, tally),
    ]
    threads = [threading.Thread(target=job, name="idioms-job") for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads), report("threads", tally)
    checks = [(label, at, DROP_TTL) for label, at in tally.dropped]  # dropped handles
    ended = time.monotonic()  # and every name of the run free (both permits, a writer)
    for kind in ("lock", "rlock", "semaphore", "semaphore", "write"):
        checks.append((f"{kind}:{names(kind, 'threads')[0]}", ended, TTL))
    held = []
    for label, since, ttl in checks:
        kind, name = label.split(":", 1)
        handle = sync_handle(client, checker_of(kind), name, ttl)
        if sync_taken(handle, since, ttl):
            held.append(handle)
        else:
            tally.failed(f"{label} still held {ttl + SLACK:.1f} s after its handle was gone")
    for handle in held:
        handle.release()
    redlease.close(client)
    client.close()
    for _ in range(150):  # bounded: what close() ended has ended
        extra = [t for t in threading.enumerate() if t not in before]
        if not extra:
            break
        time.sleep(0.02)
    assert not extra, f"threads left behind: {[t.name for t in extra]}"
    check_end(checker, "threads", tally)
    admin.close()
    checker.close()


# -- the twin --------------------------------------------------------------------------------


def test_twin_the_checks_catch_what_they_check(make_server: Any) -> None:
    """Each check above fails when its property does not hold: sections entered without the
    lock overlap (the server counts violations), and a handle kept alive (not dropped) keeps
    its name past DROP_TTL + SLACK."""
    srv = make_server()
    _, checker = worker_clients(srv)
    tally = Tally()

    def unlocked() -> None:  # the check's own code, with no lock around it
        for _ in range(20):
            sync_section(checker, "lock", _NoLock(), tally)

    threads = [threading.Thread(target=unlocked) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert int(checker.get(f"idioms:{SEED}:threads:violations") or 0) > 0

    client = redis.Redis(host=srv.host, port=srv.port)
    kept = sync_handle(client, "lock", f"idioms:{SEED}:twin:kept", DROP_TTL)
    assert kept.acquire()
    other = sync_handle(client, "lock", f"idioms:{SEED}:twin:kept", DROP_TTL)
    assert not sync_taken(other, time.monotonic())  # renewed: it still lives
    kept.release()
    redlease.close(client)
    client.close()
    checker.close()


class _NoLock:
    fence = 0
