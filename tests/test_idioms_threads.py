"""The idioms suite's threads part: handles shared by threads, ``fork`` while holding, handles
dropped without release, mixed at random against one server (what runs and what is
checked: tests/idioms.py); and the twin that shows the checks catch what they check."""

from __future__ import annotations

import gc
import os
import random
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

import pytest
import redis

import redlease
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
from tests.topology import RedisServer

pytestmark = [pytest.mark.timeout(120), pytest.mark.usefixtures("frozen_heap")]


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
            except redlease.LockLost:  # across a kill, as a release may find it
                tally.count("re-entry: lost")
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
