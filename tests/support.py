"""Test helpers whose sync and asyncio forms differ, side by side (as in _synchronization).

Tests in ``tests/_async`` use ``AsyncTasks``; the generated ``tests/_sync`` use ``Tasks``.
"""

from __future__ import annotations

import asyncio
import functools
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import pytest
import redis
import redis.asyncio

from redlease.server import ServerNotFound, find_server_binary
from tests.topology import binary_version

T = TypeVar("T")


@functools.cache
def server_banner() -> tuple[tuple[int, int, int] | None, str]:
    """``(the Redis version it speaks, what it is)`` of the tests' server binary, read once
    (a valkey-server speaks Redis 7.2); ``(None, why)`` when there is none or it is unknown."""
    try:
        return binary_version(find_server_binary())
    except ServerNotFound as exc:
        return None, str(exc)


def server_older_than(version: tuple[int, int]) -> str | None:
    """Why a test needing Redis ``version`` cannot run here, or None when it can (also when
    the version is unknown: the test then runs and says what failed)."""
    found, what = server_banner()
    if found is None or found[:2] >= version:
        return None
    return f"needs Redis >= {version[0]}.{version[1]}; the tests' server is {what}"


def needs_server(version: tuple[int, int], feature: str) -> pytest.MarkDecorator:
    """Skip a test on a server older than ``version``, naming ``feature`` (e.g. WAITAOF)."""
    why = server_older_than(version)
    return pytest.mark.skipif(why is not None, reason=f"{feature} {why}")


def coroutine_callback(calls: list[str]) -> Callable[[], Awaitable[None]]:
    """A coroutine function that records its calls (not rewritten for the sync tests)."""

    async def callback() -> None:
        calls.append("called")

    return callback


class AsyncTasks:
    """Run coroutines in other tasks: what owns a lock in redlease.asyncio."""

    WRONG_CLIENT = redis.Redis  # a client the asyncio API must refuse
    ASYNC = True

    @staticmethod
    async def run(fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``fn`` in another task and return its result."""
        return await asyncio.get_running_loop().create_task(fn())  # type: ignore[arg-type]

    @staticmethod
    async def gather(*fns: Callable[[], Awaitable[Any]]) -> list[Any]:
        """Run ``fns`` concurrently, each in its own task."""
        return list(await asyncio.gather(*(fn() for fn in fns)))

    @staticmethod
    async def blocking(fn: Callable[[], T]) -> T:
        """Run a blocking call (a topology's failover) without blocking the event loop."""
        return await asyncio.to_thread(fn)

    @staticmethod
    def spawn(fn: Callable[[], Awaitable[Any]]) -> Any:
        """Start ``fn`` in another task, not awaited; :meth:`outcome` waits for it."""
        return asyncio.get_running_loop().create_task(fn())  # type: ignore[arg-type]

    @staticmethod
    async def outcome(started: Any, timeout: float = 60.0) -> Any:
        """What a :meth:`spawn`-ed call returned, or the exception it raised."""
        try:
            return await asyncio.wait_for(started, timeout)
        except Exception as exc:
            return exc

    @staticmethod
    async def sleep(seconds: float) -> None:
        await asyncio.sleep(seconds)

    @staticmethod
    def current() -> str:
        """The name of the task running now ("" outside one)."""
        task = asyncio.current_task()
        return "" if task is None else task.get_name()

    @staticmethod
    def names() -> list[str]:
        """Names of the tasks alive now."""
        return [t.get_name() for t in asyncio.all_tasks()]

    @staticmethod
    def background() -> set[Any]:
        """redlease's own tasks alive now (watchdog, waiter hub reader, clean-ups)."""
        return {t for t in asyncio.all_tasks() if t.get_name().startswith("redlease-")}


class Tasks:
    """Run functions in other threads: what owns a lock in redlease."""

    WRONG_CLIENT = redis.asyncio.Redis  # a client the sync API must refuse
    ASYNC = False

    @staticmethod
    def run(fn: Callable[[], T]) -> T:
        """Run ``fn`` in another thread and return its result (or raise its exception)."""
        return Tasks.gather(fn)[0]  # type: ignore[no-any-return]

    @staticmethod
    def gather(*fns: Callable[[], Any]) -> list[Any]:
        """Run ``fns`` concurrently, each in its own thread."""
        results: list[Any] = [None] * len(fns)
        errors: list[BaseException] = []

        def call(i: int, fn: Callable[[], Any]) -> None:
            try:
                results[i] = fn()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=call, args=(i, fn)) for i, fn in enumerate(fns)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        if errors:
            raise errors[0]
        return results

    @staticmethod
    def blocking(fn: Callable[[], T]) -> T:
        """Run a blocking call (the asyncio twin runs it in a thread)."""
        return fn()

    @staticmethod
    def spawn(fn: Callable[[], Any]) -> Any:
        """Start ``fn`` in another thread; :meth:`outcome` waits for it."""
        box: list[Any] = []

        def call() -> None:
            try:
                box.append(fn())
            except Exception as exc:
                box.append(exc)

        thread = threading.Thread(target=call, name="test-spawned", daemon=True)
        thread.start()
        return thread, box

    @staticmethod
    def outcome(started: Any, timeout: float = 60.0) -> Any:
        """What a :meth:`spawn`-ed call returned, or the exception it raised."""
        thread, box = started
        thread.join(timeout)
        return box[0] if box else TimeoutError("still running")

    @staticmethod
    def sleep(seconds: float) -> None:
        time.sleep(seconds)

    @staticmethod
    def current() -> str:
        """The name of the thread running now."""
        return threading.current_thread().name

    @staticmethod
    def names() -> list[str]:
        """Names of the threads alive now."""
        return [t.name for t in threading.enumerate()]

    @staticmethod
    def background() -> set[Any]:
        """redlease's own threads alive now (watchdog, waiter hub reader, clean-ups)."""
        return {t for t in threading.enumerate() if t.name.startswith("redlease-")}


def a_plain_function() -> None:
    """What an asyncio lock refuses to decorate (the generated sync tests keep it apart)."""


async def a_coroutine_function() -> None:
    """What a sync lock refuses to decorate."""
