"""A forked child never uses its parent's connections, runtime or process id, and owns
nothing of its parent's: its inherited handles hold nothing, release nothing, renew nothing.

The hot path reads the process id once per process (``os.getpid()`` is a system call) and again
in a forked child (``os.register_at_fork``). If that failed, a child would send its scripts on
the sockets it inherited, which the parent also reads: replies would go to the wrong process.
"""

from __future__ import annotations

import asyncio
import faulthandler
import json
import os
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
import redis
import redis.asyncio

import redlease
import redlease._core.lease as lease
import redlease.asyncio
from redlease._sync.runtime import runtime_for

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform"),
]


def _in_child(client: redis.Redis, *, stale_pid: int | None) -> dict[str, Any]:
    """Fork; the child takes and releases a lock on ``client`` and reports what it used.

    ``stale_pid``: the child first sets the cached process id back to it (the twin: what the
    child would see if the fork hook had not run)."""
    parent = runtime_for(client)
    parent_conns = {id(c) for c, _ in parent.backend.keeper.kept}
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        code = 1
        try:
            if stale_pid is not None:
                lease._pid = stale_pid
            lock = redlease.Lock(client, "fork:child", ttl=5.0, renew=False)
            took = lock.acquire(timeout=5)
            runtime = runtime_for(client)
            mine = {id(c) for c, _ in runtime.backend.keeper.kept}
            lock.release()
            report = {
                "took": took,
                "own_runtime": runtime is not parent,
                "inherited_connections": bool(mine & parent_conns),
                "pid_is_mine": lease.pid() == os.getpid(),
            }
            os.write(write, json.dumps(report).encode())
            code = 0
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    result: dict[str, Any] = json.loads(text)
    return result


def _parent_uses_its_lock(client: redis.Redis) -> None:
    lock = redlease.Lock(client, "fork:parent", ttl=5.0)
    for _ in range(20):  # its kept connections still answer in order
        assert lock.acquire(timeout=5)
        assert lock.fence is not None
        lock.release()


def test_a_forked_child_uses_a_runtime_and_connections_of_its_own(client: redis.Redis) -> None:
    _parent_uses_its_lock(client)  # a runtime, a kept connection, a renewer thread
    seen = _in_child(client, stale_pid=None)
    assert seen == {
        "took": True,
        "own_runtime": True,
        "inherited_connections": False,
        "pid_is_mine": True,
    }
    _parent_uses_its_lock(client)


def test_twin_a_child_with_its_parents_pid_shares_the_parents_connections(
    client: redis.Redis,
) -> None:
    """The check above can fail: a child left with the parent's cached id takes the parent's
    runtime and its kept sockets."""
    _parent_uses_its_lock(client)
    seen = _in_child(client, stale_pid=os.getpid())
    assert seen["own_runtime"] is False
    assert seen["inherited_connections"] is True
    assert seen["pid_is_mine"] is False


# -- a child owns nothing of its parent's (issue 23, item 6) ---------------------------------
def _fork(body: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Run ``body`` in a forked child; what it returned (through a pipe)."""
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the child, which reports through the pipe
        code = 1
        faulthandler.dump_traceback_later(20, exit=True)  # never left behind, hung
        try:
            os.write(write, json.dumps(body()).encode())
            code = 0
        except BaseException as exc:
            os.write(write, repr(exc).encode())
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == 0, text
    result: dict[str, Any] = json.loads(text)
    return result


def _refusals(lock: Any) -> dict[str, Any]:
    """What a child sees of a handle its parent holds, and what it may do with it."""
    seen: dict[str, Any] = {"fence": lock.fence, "owned": lock.owned()}
    for action in ("release", "extend", "exit"):
        try:
            if action == "exit":
                lock.__exit__(None, None, None)  # a ``with`` block left in the child
            else:
                getattr(lock, action)()
            seen[action] = "done"
        except redlease.LockNotOwned as exc:
            seen[action] = str(exc)
    return seen


def test_a_forked_child_cannot_release_its_parents_lock(client: redis.Redis) -> None:
    lock = redlease.Lock(client, "fork:held", ttl=30.0)
    with lock:
        token = client.get(lock._keys.lock)
        seen = _fork(lambda: _refusals(lock))
        assert seen["fence"] is None and seen["owned"] is False
        for action in ("release", "extend", "exit"):
            assert "acquired by another process" in seen[action], seen
        # The parent's lease is untouched: same token, still its, nobody else gets in.
        assert client.get(lock._keys.lock) == token
        assert lock.owned()
        assert redlease.Lock(client, "fork:held").acquire(blocking=False) is False
    assert not lock.locked()


@pytest.mark.parametrize("kind", ["rlock", "redlock"])
def test_nor_its_parents_rlock_or_redlock(
    client: redis.Redis, redlock_clients: list[redis.Redis], kind: str
) -> None:
    lock: Any = (
        redlease.RLock(client, "fork:rlock", ttl=30.0)
        if kind == "rlock"
        else redlease.Redlock(redlock_clients, "fork:redlock", ttl=30.0)
    )
    with lock:
        seen = _fork(lambda: _refusals(lock))
        assert seen["fence"] is None and seen["owned"] is False
        for action in ("release", "extend", "exit"):
            assert "acquired by another process" in seen[action], seen
        assert lock.owned()
    assert not lock.locked()


def test_twin_a_child_that_passes_for_the_acquirer_releases_the_parents_lock(
    client: redis.Redis,
) -> None:
    """The check above can fail: a child whose inherited holding passes for its own (the
    process that acquired not compared) releases the parent's lease under the parent's feet."""
    lock = redlease.Lock(client, "fork:stolen", ttl=30.0)
    assert lock.acquire()

    def unchecked() -> dict[str, Any]:
        holding = lock._holding
        assert holding is not None
        holding.pid, holding.holder = os.getpid(), (os.getpid(), threading.current_thread())
        return _refusals(lock)

    seen = _fork(unchecked)
    assert seen["fence"] is not None and seen["release"] == "done"
    assert client.exists(lock._keys.lock) == 0
    assert redlease.Lock(client, "fork:stolen").acquire(blocking=False)  # while "held"


def test_a_forked_child_acquires_through_an_inherited_handle(client: redis.Redis) -> None:
    lock = redlease.Lock(client, "fork:mutex", ttl=30.0)
    held = threading.Event()
    fences: list[int | None] = []

    def hold_then_release() -> None:  # the parent's holder: a thread of its own
        assert lock.acquire()
        fences.append(lock.fence)
        held.set()
        time.sleep(0.5)
        lock.release()

    def take() -> dict[str, Any]:
        refused = lock.acquire(timeout=0)  # held by the parent: contention, not RuntimeError
        took = lock.acquire(timeout=20)  # once the parent released
        fence = lock.fence
        lock.release()
        return {"refused": refused, "took": took, "fence": fence}

    holder = threading.Thread(target=hold_then_release)
    holder.start()
    assert held.wait(10)
    seen = _fork(take)
    holder.join()
    assert seen["refused"] is False and seen["took"] is True
    assert seen["fence"] > (fences[0] or 0)


def test_twin_an_inherited_mutex_stays_locked_in_the_child(client: redis.Redis) -> None:
    """The check above can fail: a child that kept its parent's process-local mutex (locked
    while the parent holds the lock) never gets past it, though Redis is free."""
    lock = redlease.Lock(client, "fork:locked-mutex", ttl=30.0)
    assert lock.acquire()

    def take() -> dict[str, Any]:
        lock._mutex._pid = os.getpid()  # as if the mutex were the child's own
        lock._holding = None  # and the handle held nothing
        client.delete(lock._keys.lock)  # Redis is free
        return {"took": lock.acquire(timeout=0.5)}

    assert _fork(take) == {"took": False}
    with pytest.raises(redlease.LockLost):
        lock.release()  # the child deleted the key


def test_a_forked_child_never_renews_its_parents_lease(client: redis.Redis) -> None:
    """The parent stops renewing (``close``); its child lives on with a watchdog of its own
    (it holds another lock), and the parent's lease still runs out within its ttl."""
    lock = redlease.Lock(client, "fork:renewed", ttl=0.5)
    assert lock.acquire()
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child: a watchdog of its own, for 3 s
        try:
            other = redlease.Lock(client, "fork:child-own", ttl=0.5)
            other.acquire()
            os.write(write, b"ready")
            time.sleep(3.0)
            other.release()
        finally:
            os._exit(0)
    os.close(write)
    try:
        assert os.read(read, 5) == b"ready"
        redlease.close(client)  # the parent's watchdog stops; the lease is not released
        started = time.monotonic()
        while client.exists(lock._keys.lock) and time.monotonic() - started < 2.5:
            time.sleep(0.05)
        assert client.exists(lock._keys.lock) == 0, "renewed by the child"
        assert os.waitpid(child, os.WNOHANG) == (0, 0)  # the child was alive all along
    finally:
        os.close(read)
        os.waitpid(child, 0)


def _shared_refusals(kind: str, client: redis.Redis) -> dict[str, Any]:
    """Fork while holding one of the shared primitives; what the child saw."""
    if kind == "semaphore":
        handle: Any = redlease.Semaphore(client, "fork:sem", 1, ttl=30.0)
        acquire, release = handle.acquire, handle.release
    elif kind in ("read", "write"):
        rw = redlease.ReadWriteLock(client, f"fork:{kind}", ttl=30.0)
        handle = rw.read if kind == "read" else rw.write
        acquire, release = handle.acquire, handle.release
    else:
        handle = redlease.Election(client, "fork:election", ttl=30.0)
        acquire, release = (lambda: handle.campaign("parent")), handle.resign
    assert acquire()

    def child() -> dict[str, Any]:
        seen: dict[str, Any] = {"fence": handle.fence, "owned": handle.owned()}
        try:
            release()
            seen["release"] = "done"
        except redlease.RedleaseError as exc:
            seen["release"] = str(exc)
        return seen

    seen = _fork(child)
    seen["still_owned"] = handle.owned()
    release()
    return seen


@pytest.mark.parametrize("kind", ["semaphore", "read", "write", "election"])
def test_a_forked_child_holds_none_of_its_parents_shares(client: redis.Redis, kind: str) -> None:
    seen = _shared_refusals(kind, client)
    assert seen["fence"] is None and seen["owned"] is False
    assert "acquired by another process" in seen["release"]
    assert seen["still_owned"] is True


async def _async_child(lock: Any) -> dict[str, Any]:
    seen: dict[str, Any] = {"fence": lock.fence, "owned": await lock.owned()}
    try:
        await lock.release()
        seen["release"] = "done"
    except redlease.LockNotOwned as exc:
        seen["release"] = str(exc)
    seen["refused"] = await lock.acquire(timeout=0)
    return seen


async def test_an_asyncio_child_cannot_release_its_parents_lock(
    async_client: redis.asyncio.Redis,
) -> None:
    """A child that runs an event loop of its own with a handle its parent holds."""
    lock = redlease.asyncio.Lock(async_client, "fork:asyncio", ttl=30.0)
    assert await lock.acquire()
    token = await async_client.get(lock._keys.lock)
    seen = _fork(lambda: asyncio.run(_async_child(lock)))
    assert seen["fence"] is None and seen["owned"] is False and seen["refused"] is False
    assert "acquired by another process" in seen["release"]
    assert await async_client.get(lock._keys.lock) == token
    await lock.release()


# -- guards a child inherits locked ----------------------------------------------------------
def test_a_child_forked_while_a_guard_is_held_uses_redlease(client: redis.Redis) -> None:
    """Another thread inside ``runtime_for`` (holding its guard) at the fork: the child gets
    a free guard, so its first lock does not hang."""
    from redlease._sync import runtime

    def take() -> dict[str, Any]:
        lock = redlease.Lock(client, "fork:guard")
        took = lock.acquire(timeout=5)
        lock.release()
        return {"took": took}

    with runtime._guard:  # as if another thread were inside it at the fork
        seen = _fork(take)
    assert seen == {"took": True}


def test_twin_a_plain_lock_held_at_a_fork_stays_locked_in_the_child() -> None:
    """The check above can fail: a plain ``threading.Lock`` held at the fork is locked for good
    in the child (the thread that held it was not copied)."""
    plain = threading.Lock()
    guard = redlease._synchronization.ProcessLock()
    with plain, guard:
        seen = _fork(
            lambda: {
                "plain": plain.acquire(timeout=0.2),
                "guard": guard._lock.acquire(timeout=0.2),
            }
        )
    assert seen == {"plain": False, "guard": True}
