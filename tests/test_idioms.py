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
import signal
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
from redlease._core.lock import LockKeys
from redlease.server import RedisServer

pytestmark = pytest.mark.timeout(120)

SEED = int(os.environ.get("REDLEASE_IDIOMS_SEED") or random.randrange(2**32))
RUN = 4.0  # seconds of mixed traffic per part
TTL = 2.0  # the leases of the locks under the exclusion check
DROP_TTL = 1.0  # the leases of the handles dropped without release
SLACK = 1.5  # a loaded machine's allowance on top of a lease
SLOW = 2.5  # seconds the slow on_lost blocks: longer than TTL
KINDS = ("lock", "rlock", "semaphore", "read", "write")
LIMIT = {"lock": 1, "rlock": 1, "semaphore": 2, "read": 1000, "write": 1}

# enter: count this holder on its side; a violation if the side is over its limit or the
# other side is held (a ReadWriteLock). KEYS: side, other side, violations; ARGV: limit.
ENTER = """
local n = redis.call('INCR', KEYS[1])
local other = tonumber(redis.call('GET', KEYS[2]) or '0')
if n > tonumber(ARGV[1]) or other > 0 then redis.call('INCR', KEYS[3]) end
return n
"""
LOSERS = ("LockLost", "PermitLost")


def checker_of(kind: str) -> str:
    """The kind of handle that cannot take the name while a dropped ``kind`` holds it."""
    return "write" if kind == "read" else kind


def lock_key(name: str) -> bytes:
    return LockKeys.build("redlease", name.encode()).lock


def names(kind: str, part: str) -> tuple[str, str, str]:
    """(lock name, counter key of its side, counter key of the other side)."""
    name = "rw" if kind in ("read", "write") else kind
    other = {"read": "write", "write": "read"}.get(kind, "none")
    base = f"idioms:{SEED}:{part}"
    return f"{base}:{name}", f"{base}:cs:{kind}", f"{base}:cs:{other}"


class Tally:
    """What a part saw (for the report and the checks)."""

    def __init__(self) -> None:
        self.sections = 0
        self.fences: list[int] = []
        self.errors: list[str] = []  # failures: a lost lease, an unexpected error
        self.counts: dict[str, int] = {}
        self.dropped: list[tuple[str, float]] = []  # (kind, when its handle was dropped)
        self.guard = threading.Lock()

    def count(self, what: str) -> None:
        with self.guard:
            self.counts[what] = self.counts.get(what, 0) + 1

    def failed(self, what: str) -> None:
        with self.guard:
            self.errors.append(what)


def report(part: str, tally: Tally) -> str:
    return (
        f"{part}: seed {SEED} (REDLEASE_IDIOMS_SEED={SEED} replays it), {tally.sections} "
        f"critical sections, {sorted(tally.counts.items())}, failures {tally.errors[:5]}"
    )


def kill_connections(admin: redis.Redis, rng: random.Random, tally: Tally) -> None:
    """CLIENT KILL the workers' connections (normal or pub/sub), not the checker's."""
    kind = rng.choice(["normal", "pubsub"])
    for conn in admin.client_list(_type=kind):
        if conn.get("name") == "idioms-worker":
            try:
                admin.client_kill_filter(_id=conn["id"])
                tally.count(f"killed {kind}")
            except redis.ResponseError:  # gone meanwhile
                pass


def worker_clients(srv: RedisServer) -> tuple[redis.Redis, redis.Redis]:
    """(admin, checker): never killed (named apart from the workers' connections)."""
    admin = redis.Redis(host=srv.host, port=srv.port, client_name="idioms-admin")
    checker = redis.Redis(host=srv.host, port=srv.port, client_name="idioms-checker")
    return admin, checker


def check_end(checker: redis.Redis, part: str, tally: Tally) -> None:
    why = report(part, tally)
    print(why)
    assert not tally.errors, why
    assert int(checker.get(f"idioms:{SEED}:{part}:violations") or 0) == 0, why
    assert tally.fences == sorted(set(tally.fences)), f"fences not increasing: {why}"
    assert tally.sections > 10, why  # the run did something


# -- asyncio ---------------------------------------------------------------------------------


def async_handle(client: Any, kind: str, name: str, ttl: float, on_lost: Any = None) -> Any:
    if kind == "lock":
        return aredlease.Lock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "rlock":
        return aredlease.RLock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "semaphore":
        return aredlease.Semaphore(client, name, 2 if ttl == TTL else 1, ttl=ttl)
    rw = aredlease.ReadWriteLock(client, name, ttl=ttl)
    return rw.read if kind == "read" else rw.write


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


async def async_victim(client: Any, checker: Any, tally: Tally) -> None:
    """A lock taken away from its holder, whose on_lost is slow (SLOW s, longer than TTL)."""
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


async def async_killer(admin: redis.Redis, end: float, tally: Tally) -> None:
    rng = random.Random(f"{SEED}:kill")
    while time.monotonic() < end:
        await asyncio.sleep(rng.uniform(0.5, 1.0))
        await asyncio.to_thread(kill_connections, admin, rng, tally)


async def drops_end(client: Any, tally: Tally) -> None:
    """A new handle gets each dropped handle's name within its ttl (and the slack)."""

    async def one(label: str, dropped_at: float) -> None:
        kind, name = label.split(":", 1)
        handle = async_handle(client, checker_of(kind), name, DROP_TTL)
        for _ in range(3):  # a connection the killer closed fails the call that reuses it
            left = max(dropped_at + DROP_TTL + SLACK - time.monotonic(), 0.1)
            try:
                if await handle.acquire(timeout=left):
                    await handle.release()
                    return
                break
            except aredlease.Unavailable:
                continue
        tally.failed(f"dropped {label} still held {DROP_TTL + SLACK:.1f} s after the drop")

    await asyncio.gather(*(one(label, at) for label, at in tally.dropped))


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
        jobs += [async_dropper(client, end, tally), async_victim(client, checker, tally)]
        jobs.append(async_killer(admin, end, tally))
        await asyncio.gather(*jobs)
        await drops_end(client, tally)
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


def sync_handle(client: Any, kind: str, name: str, ttl: float, on_lost: Any = None) -> Any:
    if kind == "lock":
        return redlease.Lock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "rlock":
        return redlease.RLock(client, name, ttl=ttl, on_lost=on_lost)
    if kind == "semaphore":
        return redlease.Semaphore(client, name, 2 if ttl == TTL else 1, ttl=ttl)
    rw = redlease.ReadWriteLock(client, name, ttl=ttl)
    return rw.read if kind == "read" else rw.write


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


def wait_child(pid: int, limit: float = 20.0) -> int:
    """The child's exit status, killing it if it is not done within ``limit`` seconds."""
    stop = time.monotonic() + limit
    while time.monotonic() < stop:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return -9


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


def sync_taken(handle: Any, dropped_at: float) -> bool:
    """Whether ``handle`` gets its name within DROP_TTL + SLACK of ``dropped_at``."""
    for _ in range(3):  # a connection the killer closed fails the call that reuses it
        left = max(dropped_at + DROP_TTL + SLACK - time.monotonic(), 0.1)
        try:
            if handle.acquire(timeout=left):
                handle.release()
                return True
            return False
        except redlease.Unavailable:
            continue
    return False


def sync_victim(client: Any, checker: redis.Redis, tally: Tally) -> None:
    told = threading.Event()

    def slow_on_lost() -> None:
        told.set()
        time.sleep(SLOW)  # blocks: with it on the watchdog, the TTL=2 s locks were lost

    name = f"idioms:{SEED}:threads:victim"
    victim = redlease.Lock(client, name, ttl=1.0, on_lost=slow_on_lost)
    assert victim.acquire(timeout=5)
    checker.delete(lock_key(name))
    if told.wait(10):
        tally.count("slow on_lost")
    else:
        tally.failed("the victim's on_lost was never called")


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
        lambda: sync_victim(client, checker, tally),
        lambda: sync_killer(admin, end, tally),
    ]
    threads = [threading.Thread(target=job, name="idioms-job") for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not any(t.is_alive() for t in threads), report("threads", tally)
    for label, dropped_at in tally.dropped:
        kind, name = label.split(":", 1)
        if not sync_taken(sync_handle(client, checker_of(kind), name, DROP_TTL), dropped_at):
            tally.failed(f"dropped {label} still held {DROP_TTL + SLACK:.1f} s after the drop")
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
