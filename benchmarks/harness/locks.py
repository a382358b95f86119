"""A lock handle in one process: one acquire+release as a timed operation, the raw floor
every lease lock is measured against, and the warm-up of a lock's waiting path."""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from typing import Any

from harness.timing import Op

# The raw floor's release: compare-and-delete, as every lease lock does it.
CAD_SCRIPT = (
    "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) "
    "else return 0 end"
)


def raw_floor(client: Any, sha: str, key: str, is_async: bool = False) -> Op:
    """The least a lease lock does, as a timed operation: ``SET key token NX PX 10000`` of a
    random token, then ``EVALSHA`` of :data:`CAD_SCRIPT` (loaded as ``sha``) to delete it."""
    if is_async:

        async def afloor() -> None:
            token = secrets.token_hex(16)
            await client.set(key, token, nx=True, px=10000)
            await client.evalsha(sha, 1, key, token)

        return True, afloor

    def floor() -> None:
        token = secrets.token_hex(16)
        client.set(key, token, nx=True, px=10000)
        client.evalsha(sha, 1, key, token)

    return False, floor


def acquire_release(lock: Any, is_async: bool, failure: str) -> Op:
    """One acquire+release of ``lock`` as a timed operation; RuntimeError(failure) if the
    acquire of the free lock returns False."""
    if is_async:

        async def aop() -> None:
            if not await lock.acquire():
                raise RuntimeError(failure)
            await lock.release()

        return True, aop

    def sop() -> None:
        if not lock.acquire():
            raise RuntimeError(failure)
        lock.release()

    return False, sop


def wait_once(holder: Any, waiter: Any, loop: asyncio.AbstractEventLoop | None) -> bool:
    """Warm up a library's waiting path: ``holder`` takes a lock and keeps it 30 ms while
    ``waiter`` (another handle on the same name, in this process) blocks on it; both release.

    What a library sets up the first time a process waits (a pub/sub subscription, a pooled
    connection for a blocking pop) is then set up before the measured window, as in any
    process that has run for a while, and is not counted in its figures. Returns whether the
    waiter got the lock.
    """
    if loop is not None:
        return loop.run_until_complete(_wait_once_async(holder, waiter))
    taken = threading.Event()

    def hold() -> None:
        if holder.acquire():
            taken.set()
            time.sleep(0.03)
            holder.release()
        taken.set()

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    taken.wait(10)
    ok = bool(waiter.acquire())
    if ok:
        waiter.release()
    thread.join(10)
    return ok


async def _wait_once_async(holder: Any, waiter: Any) -> bool:
    taken = asyncio.Event()

    async def hold() -> None:
        try:
            if await holder.acquire():
                taken.set()
                await asyncio.sleep(0.03)
                await holder.release()
        finally:
            taken.set()

    task = asyncio.ensure_future(hold())
    await asyncio.wait_for(taken.wait(), 10)
    ok = bool(await waiter.acquire())
    if ok:
        await waiter.release()
    await task
    return ok
