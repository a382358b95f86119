"""The libraries under test, each a Redlock over a list of servers with its defaults and a
common lease (``Backend``), in a process of its own with a private loop if asyncio (``Proc``)."""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import time
from collections.abc import Sequence
from typing import Any

from harness.locks import wait_once
from harness.report import error_text
from harness.timing import close_loop

LIBS: dict[str, str] = {
    "redlease": "redlease Redlock",
    "redlease-async": "redlease.asyncio Redlock",
    "pottery": "pottery Redlock",
    "aioredlock": "aioredlock Aioredlock",
}
ASYNC_LIBS = {"redlease-async", "aioredlock"}
MINE = ("redlease", "redlease-async")
FLOORS: dict[str, str] = {
    "floor": "do-nothing Redlock: SET NX PX + EVALSHA del, kept conns, write all then read",
    "nothing-async": "do-nothing Redlock, asyncio: the same on kept asyncio connections",
    "floor-async": "raw floor, redis.asyncio + gather (client pools)",
    "scripts": "redlease's acquire + release scripts, do-nothing fan-out (sync)",
}
NOTHING = {False: "floor", True: "nothing-async"}
"""The do-nothing Redlock of each kind (sync, asyncio): the floor a Redlock is judged by."""
TTL = 10.0  # the common lease, seconds
SIZES = (1, 5)  # servers per lock in section 1


def _small_quorum(cls: Any) -> dict[str, bool]:
    """``allow_small_quorum=True`` where the Redlock takes it (the 1-server row; earlier
    versions of redlease, measured by before_after.py, accepted 1 server without it)."""
    return (
        {"allow_small_quorum": True}
        if "allow_small_quorum" in inspect.signature(cls).parameters
        else {}
    )


class Backend:
    """One library's clients for a list of servers, in one process.

    ``lock(name)`` gives a handle with ``acquire() -> bool`` and ``release()`` (coroutines for
    asyncio libraries). ``acquire()`` is each library's default call: blocking without a
    timeout for redlease and pottery (pottery retries forever after a random 0-0.2 s sleep),
    three tries then ``LockError`` for aioredlock, reported here as ``False``.
    asyncio backends are built with ``await Backend.open_async(...)`` inside their loop.
    """

    def __init__(self, lib: str, urls: Sequence[str]) -> None:
        self.lib = lib
        self.urls = list(urls)
        self.is_async = lib in ASYNC_LIBS
        self.clients: list[Any] = []
        self.manager: Any = None
        if not self.is_async:
            import redis

            self.clients = [redis.Redis.from_url(u) for u in self.urls]

    @classmethod
    async def open_async(cls, lib: str, urls: Sequence[str]) -> Backend:
        self = cls(lib, urls)
        if lib == "redlease-async":
            import redis.asyncio

            self.clients = [redis.asyncio.Redis.from_url(u) for u in self.urls]
        elif lib == "aioredlock":
            from aioredlock import Aioredlock

            self.manager = Aioredlock(list(self.urls))  # URL strings: aioredis pools
        return self

    def lock(self, name: str) -> Any:
        """A lock of this library on ``self.clients`` (1 or 5 servers)."""
        if self.lib == "redlease":
            import redlease

            return redlease.Redlock(self.clients, name, ttl=TTL, **_small_quorum(redlease.Redlock))
        if self.lib == "redlease-async":
            import redlease.asyncio

            cls = redlease.asyncio.Redlock
            return cls(self.clients, name, ttl=TTL, **_small_quorum(cls))
        if self.lib == "pottery":
            import pottery

            return pottery.Redlock(key=name, masters=set(self.clients), auto_release_time=TTL)
        if self.lib == "aioredlock":
            return _AioHandle(self.manager, name)
        raise ValueError(f"unknown library {self.lib!r}")

    def close(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                client.close()

    async def aclose(self) -> None:
        for client in self.clients:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(client.aclose(), 5)
        if self.manager is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.manager.destroy(), 5)


class _AioHandle:
    """aioredlock's lock call as acquire/release; LockError (it gave up) -> False."""

    def __init__(self, manager: Any, name: str) -> None:
        self.manager, self.name, self.held = manager, name, None

    async def acquire(self) -> bool:
        from aioredlock import LockError

        try:
            self.held = await self.manager.lock(self.name, lock_timeout=int(TTL))
        except LockError:
            return False
        return True

    async def release(self) -> None:
        held, self.held = self.held, None
        await self.manager.unlock(held)


class Proc:
    """A backend in a child process, with a private event loop for asyncio libraries."""

    def __init__(self, lib: str, urls: Sequence[str]) -> None:
        self.is_async = lib in ASYNC_LIBS
        self.loop: asyncio.AbstractEventLoop | None = None
        if self.is_async:
            self.loop = asyncio.new_event_loop()
            self.backend = self.loop.run_until_complete(Backend.open_async(lib, urls))
        else:
            self.backend = Backend(lib, urls)

    def run(self, coro: Any) -> Any:
        assert self.loop is not None
        return self.loop.run_until_complete(coro)

    def once(self, lock: Any) -> bool:
        if not self.is_async:
            ok = bool(lock.acquire())
            if ok:
                lock.release()
            return ok

        async def go() -> bool:
            ok = bool(await lock.acquire())
            if ok:
                await lock.release()
            return ok

        return self.run(go())

    def warm_up(self, name: str) -> list[str]:
        """Connect, load scripts, start helpers, and wait once (``wait_once``): on a lock
        nobody else uses.

        Three acquire+release pairs must succeed within ten tries; the errors of the failed
        tries are returned (first calls can time out while 16 processes start on 2 CPUs).
        """
        lock = self.backend.lock(f"{name}:warm:{os.getpid()}")
        errors: list[str] = []
        done = 0
        for _ in range(10):
            try:
                if self.once(lock):
                    done += 1
                else:
                    errors.append("acquire of a free lock failed")
            except Exception as exc:
                errors.append(error_text(exc))
                time.sleep(0.05)
            if done == 3:
                other = self.backend.lock(f"{name}:warm:{os.getpid()}")
                if not wait_once(other, lock, self.loop):
                    errors.append("the waiting warm-up did not get the lock")
                return errors
        raise RuntimeError(f"warm-up failed {len(errors)} times; first: {errors[0]}")

    def close(self) -> None:
        if self.loop is None:
            self.backend.close()
            return
        # aioredlock logs every unlock its background clean-up cannot finish once the
        # pools are closed: expected at teardown, and noise on the terminal.
        logging.getLogger("aioredlock").setLevel(logging.CRITICAL)
        with contextlib.suppress(Exception):
            self.loop.run_until_complete(self.backend.aclose())
        close_loop(self.loop)
        self.loop = None
