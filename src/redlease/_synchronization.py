"""The few concurrency primitives whose sync and asyncio forms differ, side by side.

Code in ``_async/`` uses the ``Async*`` names; ``scripts/unasync.py`` rewrites them to the plain
names for ``_sync/``. Each pair has the same methods, so the generated code is the same
algorithm with threads where the original has tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
import threading
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from redis.exceptions import TimeoutError

__all__ = [
    "AsyncBackground",
    "AsyncEvent",
    "AsyncMutex",
    "AsyncReads",
    "AsyncShield",
    "Background",
    "Event",
    "Mutex",
    "Reads",
    "Shield",
]


class AsyncEvent:
    """An event a task waits on, with a timeout (a future and a timer: no task per wait)."""

    def __init__(self) -> None:
        self._set = False
        self._waiters: list[asyncio.Future[bool]] = []

    def set(self) -> None:
        self._set = True
        for future in self._waiters:
            if not future.done():
                future.set_result(True)
        self._waiters.clear()

    def clear(self) -> None:
        self._set = False

    async def wait(self, timeout: float | None) -> bool:
        """Wait until set or ``timeout`` seconds passed (``None``: no limit); True if set."""
        if self._set:
            return True
        loop = asyncio.get_running_loop()
        future: asyncio.Future[bool] = loop.create_future()
        self._waiters.append(future)
        timer = None if timeout is None else loop.call_later(max(timeout, 0.0), _expire, future)
        try:
            return await future
        finally:
            if timer is not None:
                timer.cancel()
            if future in self._waiters:
                self._waiters.remove(future)


def _expire(future: asyncio.Future[bool]) -> None:
    if not future.done():
        future.set_result(False)


class Event:
    """An event a thread waits on, with a timeout."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def wait(self, timeout: float | None) -> bool:
        """Wait until set or ``timeout`` seconds passed (``None``: no limit); True if set."""
        return self._event.wait(timeout)


class AsyncMutex:
    """A process-local mutex for tasks: a lock handle's users queue on it."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()

    async def acquire(self, timeout: float | None) -> bool:
        """Take the mutex within ``timeout`` seconds (``None``: no limit)."""
        if timeout is not None and timeout <= 0:
            if self._lock.locked():
                return False
            timeout = None  # free: acquire() will not wait
        try:
            await asyncio.wait_for(self._lock.acquire(), timeout)
        except asyncio.TimeoutError:
            return False
        return True

    def release(self) -> None:
        self._lock.release()


class Mutex:
    """A process-local mutex for threads: a lock handle's users queue on it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, timeout: float | None) -> bool:
        """Take the mutex within ``timeout`` seconds (``None``: no limit)."""
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(timeout=max(timeout, 0.0))

    def release(self) -> None:
        self._lock.release()


class AsyncBackground:
    """A background task of the running event loop (the watchdog, the waiter hub's reader)."""

    OWNER = "task"
    """What owns a lock, in error messages."""
    ASYNC = True
    """Coroutine callbacks can be run (on the lock's event loop)."""

    def __init__(self, target: Callable[[], Awaitable[None]], name: str) -> None:
        async def run() -> None:
            await target()

        self._task = asyncio.get_running_loop().create_task(run(), name=name)

    @staticmethod
    def call(callback: Callable[[], object]) -> None:
        """Run a callback (``on_lost``); an awaitable it returns runs as a task of this loop.

        Its errors are logged, never raised: the watchdog must go on.
        """
        try:
            result = callback()
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                _cleanups.add(task)
                task.add_done_callback(_log_callback_task)
        except Exception:
            _log.exception("on_lost callback failed")

    @staticmethod
    def scope() -> Hashable:
        """What background work is bound to: the running event loop."""
        return asyncio.get_running_loop()

    @staticmethod
    def owner() -> Hashable:
        """Who holds a lock: the current task."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - redlease.asyncio is always called from a task
            raise RuntimeError("redlease.asyncio must be used from within an asyncio task")
        return task


class Background:
    """A background daemon thread (the watchdog, the waiter hub's reader)."""

    OWNER = "thread"
    """What owns a lock, in error messages."""
    ASYNC = False
    """Coroutine callbacks cannot be run (there is no event loop to run them on)."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    @staticmethod
    def call(callback: Callable[[], object]) -> None:
        """Run a callback (``on_lost``); its errors are logged, never raised."""
        try:
            callback()
        except Exception:
            _log.exception("on_lost callback failed")

    @staticmethod
    def scope() -> Hashable:
        """What background work is bound to: this process (a forked child starts afresh)."""
        return os.getpid()

    @staticmethod
    def owner() -> Hashable:
        """Who holds a lock: the current thread."""
        return threading.current_thread()


class AsyncReads:
    """Read one reply from a redis-py asyncio connection, raising when it does not come."""

    @staticmethod
    async def reply(conn: Any, timeout: float | None) -> Any:
        """The next reply, within ``timeout`` seconds (``None``: the socket timeout).

        redis-py's asyncio ``read_response(timeout=...)`` returns ``None`` on timeout (its
        pub/sub relies on that); a lock must not take a silent server for a ``nil`` reply.
        """
        if timeout is None:
            return await conn.read_response()
        try:
            return await asyncio.wait_for(conn.read_response(), timeout)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no reply within {timeout:.3f} s") from None


class Reads:
    """Read one reply from a redis-py (or valkey-py) connection, raising when it does not come."""

    @staticmethod
    def reply(conn: Any, timeout: float | None) -> Any:
        """The next reply, within ``timeout`` seconds (``None``: the socket timeout).

        ``read_response(timeout=...)`` exists only from redis-py 8 (not in valkey-py); on
        older clients the socket is polled first (``can_read``), and a reply that has started
        to arrive is read within the socket timeout.
        """
        if timeout is None:
            return conn.read_response()
        if _takes_timeout(conn):
            return conn.read_response(timeout=timeout)  # raises TimeoutError when it runs out
        if not conn.can_read(timeout=timeout):
            raise TimeoutError(f"no reply within {timeout:.3f} s")
        return conn.read_response()


_TAKES_TIMEOUT: dict[type, bool] = {}


def _takes_timeout(conn: Any) -> bool:
    """Whether ``conn.read_response`` takes ``timeout`` (redis-py 8), once per class."""
    kind = type(conn)
    known = _TAKES_TIMEOUT.get(kind)
    if known is None:
        known = _TAKES_TIMEOUT[kind] = "timeout" in inspect.signature(conn.read_response).parameters
    return known


_cleanups: set[asyncio.Future[Any]] = set()
_log = logging.getLogger("redlease")


def _log_callback_task(task: asyncio.Future[Any]) -> None:
    _cleanups.discard(task)
    if not task.cancelled() and task.exception() is not None:
        _log.error("on_lost callback failed", exc_info=task.exception())


class AsyncShield:
    """Best-effort clean-up that survives the cancellation of the task that started it."""

    @staticmethod
    async def cleanup(action: Callable[[], Awaitable[Any]]) -> None:
        """Run ``action``, ignoring its errors; if we are cancelled, it finishes on its own."""

        async def run() -> None:
            with contextlib.suppress(Exception):  # best effort: the lease expires anyway
                await action()

        task = asyncio.get_running_loop().create_task(run())
        _cleanups.add(task)
        task.add_done_callback(_cleanups.discard)
        await asyncio.shield(task)


class Shield:
    """Best-effort clean-up (threads are not cancelled: this just runs it)."""

    @staticmethod
    def cleanup(action: Callable[[], Any]) -> None:
        """Run ``action``, ignoring its errors."""
        with contextlib.suppress(Exception):  # best effort: the lease expires anyway
            action()
