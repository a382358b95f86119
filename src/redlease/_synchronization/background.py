"""Background work: the watchdog's and the hub's task or thread, the ``on_lost`` callbacks."""

from __future__ import annotations

import asyncio
import inspect
import logging
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Hashable
from typing import Any

from .._core.lease import pid
from .._logging import record

__all__ = ["AsyncBackground", "AsyncCallbacks", "Background", "Callbacks"]


class AsyncBackground:
    """A background task of the running event loop (the watchdog, the waiter hub's reader)."""

    OWNER = "task"
    """What acquired a lock (RLock re-entry is per task), in error messages."""
    HOLDER = "event loop"
    """What may release or extend a held lock (any task of its loop), in error messages."""
    ASYNC = True
    """Coroutine callbacks can be run (on the lock's event loop)."""
    LEADS = True
    """A waiting task reads its hub's subscription itself while nobody else does (a
    leader/follower hub), so its own wake-up message wakes it with no reader task between."""

    def __init__(self, target: Callable[[], Awaitable[None]], name: str) -> None:
        async def run() -> None:
            await target()

        self._task = asyncio.get_running_loop().create_task(run(), name=name)

    def cancel(self) -> None:
        """Cancel the task (unless it is the one calling)."""
        if self._task is not asyncio.current_task():
            self._task.cancel()

    async def join(self, timeout: float | None) -> None:
        """Wait until the task has ended, at most ``timeout`` seconds (not for itself)."""
        if self._task is not asyncio.current_task() and not self._task.done():
            await asyncio.wait({self._task}, timeout=timeout)

    @staticmethod
    def call(callback: Callable[[], object]) -> None:
        """Run a callback (``on_lost``); an awaitable it returns runs as a task of this loop.

        Its errors are logged, never raised: the watchdog must go on.
        """
        AsyncBackground.start(callback)

    @staticmethod
    def start(callback: Callable[[], object]) -> asyncio.Future[Any] | None:
        """:meth:`call`; returns the task running the awaitable it returned, if any."""
        try:
            result = callback()
            if inspect.isawaitable(result):
                task = asyncio.ensure_future(result)
                _cleanups.add(task)
                task.add_done_callback(_log_callback_task)
                return task
        except Exception as exc:
            _log_failure(exc)
        return None

    @staticmethod
    def scope() -> Hashable:
        """What background work is bound to: the running event loop."""
        return asyncio.get_running_loop()

    @staticmethod
    def owner() -> Hashable:
        """Who acquires a lock: the current task (for RLock re-entry and self-deadlock)."""
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - redlease.asyncio is always called from a task
            raise RuntimeError("redlease.asyncio must be used from within an asyncio task")
        return task

    @staticmethod
    def holder() -> Hashable:
        """Who may release or extend a lock: any task of the running loop, as with
        ``asyncio.Lock`` (so one taken through ``wait_for``, ``gather``, ``create_task`` or
        ``shield`` is released by the code that awaited it), in this process."""
        return (pid(), asyncio.get_running_loop())


class Background:
    """A background daemon thread (the watchdog, the waiter hub's reader)."""

    OWNER = "thread"
    """What acquired a lock, in error messages."""
    HOLDER = "thread"
    """What may release or extend a held lock (the thread that acquired), in error messages."""
    ASYNC = False
    """Coroutine callbacks cannot be run (there is no event loop to run them on)."""
    LEADS = True
    """A waiting thread reads its hub's subscription itself while nobody else does (a
    leader/follower hub), so its own wake-up message wakes it with no reader thread between."""

    def __init__(self, target: Callable[[], None], name: str) -> None:
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def cancel(self) -> None:
        """Threads cannot be cancelled: the target must notice that it is to stop."""

    def join(self, timeout: float | None) -> None:
        """Wait until the thread has ended, at most ``timeout`` seconds (not for itself)."""
        if self._thread is not threading.current_thread():
            self._thread.join(timeout)

    @staticmethod
    def call(callback: Callable[[], object]) -> None:
        """Run a callback (``on_lost``); its errors are logged, never raised."""
        try:
            callback()
        except Exception as exc:
            _log_failure(exc)

    @staticmethod
    def scope() -> Hashable:
        """What background work is bound to: this process (a forked child starts afresh)."""
        return pid()

    @staticmethod
    def owner() -> Hashable:
        """Who acquires a lock: the current thread."""
        return threading.current_thread()

    @staticmethod
    def holder() -> Hashable:
        """Who may release or extend a lock: the thread that acquired it, in this process
        (a forked child's thread object is its parent's)."""
        return (pid(), threading.current_thread())


_cleanups: set[Any] = set()  # background tasks, kept alive until done


def _log_callback_task(task: asyncio.Future[Any]) -> None:
    _cleanups.discard(task)
    if not task.cancelled():
        failure = task.exception()
        if failure is not None:
            _log_failure(failure)


def _log_failure(exc: BaseException) -> None:
    """Log a callback's error: its traceback as text, no frames kept (see ``record``)."""
    record(logging.ERROR, "on_lost_failed", "on_lost callback failed", exc_info=exc)


class AsyncCallbacks:
    """Runs the ``on_lost`` callbacks of one watchdog off its path: each in a later turn of
    the event loop (an awaitable it returns as a task of its own), so the watchdog never
    waits for one. :meth:`aclose` waits a bounded time for those still running, then
    cancels them: no task is left behind."""

    def __init__(self) -> None:
        self._tasks: set[asyncio.Future[Any]] = set()

    def submit(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` soon (its errors are logged)."""
        asyncio.get_running_loop().call_soon(self._start, callback)

    def _start(self, callback: Callable[[], object]) -> None:
        task = AsyncBackground.start(callback)
        if task is not None:
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def aclose(self, timeout: float | None) -> None:
        """Wait at most ``timeout`` seconds for the callbacks still running; cancel the rest."""
        tasks = self._tasks - {asyncio.current_task()}  # (not a callback closing redlease)
        if tasks:
            await asyncio.wait(tasks, timeout=timeout)
        for task in tasks:
            task.cancel()


class Callbacks:
    """Runs the ``on_lost`` callbacks of one watchdog off its thread, each on a daemon thread
    of its own (at most ``threads`` at once; past that, callbacks wait for the first to end),
    so a callback that blocks delays neither a renewal nor another lock's callback. A thread
    ends when no callback is waiting. :meth:`close` waits a bounded time for them."""

    def __init__(self, *, threads: int = 8) -> None:
        self._most = threads
        self._queue: queue.SimpleQueue[Callable[[], object]] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def submit(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` soon, on a callback thread (its errors are logged)."""
        with self._guard:
            self._queue.put(callback)
            if len(self._threads) < self._most:
                thread = threading.Thread(target=self._run, name="redlease-callbacks", daemon=True)
                self._threads.add(thread)
                thread.start()

    def _run(self) -> None:
        while True:
            try:
                callback = self._queue.get_nowait()
            except queue.Empty:
                with self._guard:
                    if self._queue.empty():  # (else one came meanwhile: run it)
                        self._threads.discard(threading.current_thread())
                        return
                continue
            Background.call(callback)
            del callback  # a callback that ran keeps nothing alive

    def close(self, timeout: float | None) -> None:
        """Wait at most ``timeout`` seconds in all for the callbacks queued so far to run (a
        callback that blocks longer is left to finish alone, on its daemon thread)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._guard:
            threads = list(self._threads)
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(None if deadline is None else max(deadline - time.monotonic(), 0))
