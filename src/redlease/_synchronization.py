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
import queue
import sys
import threading
import weakref
from collections.abc import AsyncGenerator, Awaitable, Callable, Hashable
from typing import Any, ParamSpec, TypeVar

from ._core.lease import pid
from ._logging import record

__all__ = [
    "MIN_BUDGET",
    "AsyncAtShutdown",
    "AsyncBackground",
    "AsyncCallbacks",
    "AsyncEvent",
    "AsyncFunction",
    "AsyncMutex",
    "AsyncShield",
    "AtShutdown",
    "Background",
    "Callbacks",
    "Event",
    "Function",
    "Mutex",
    "ProcessLock",
    "Shield",
]


_P = ParamSpec("_P")
_R = TypeVar("_R")
AsyncFunction = Callable[_P, Awaitable[_R]]
"""What an asyncio lock decorates: a coroutine function (``async def``)."""
Function = Callable[_P, _R]
"""What a sync lock decorates: a plain function."""


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

    def is_set(self) -> bool:
        return self._set

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


def _bounded(timeout: float | None) -> float | None:
    """``timeout`` at most ``threading.TIMEOUT_MAX`` (about 292 years; 49 days on Windows):
    a longer one raises OverflowError in ``threading``, and is a valid "very long"."""
    return None if timeout is None else min(timeout, threading.TIMEOUT_MAX)


class Event:
    """An event a thread waits on, with a timeout."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def set(self) -> None:
        self._event.set()

    def clear(self) -> None:
        self._event.clear()

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: float | None) -> bool:
        """Wait until set or ``timeout`` seconds passed (``None``: no limit); True if set."""
        return self._event.wait(_bounded(timeout))


class AsyncMutex:
    """A process-local mutex for tasks: a lock handle's users queue on it.

    A forked child starts with a free one (its parent's state, and event loop, are not its)."""

    def __init__(self) -> None:
        self._lock = asyncio.Lock()
        self._pid = pid()

    async def acquire(self, timeout: float | None) -> bool:
        """Take the mutex within ``timeout`` seconds (``None``: no limit)."""
        if self._pid != pid():
            self._lock, self._pid = asyncio.Lock(), pid()
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


class ProcessLock:
    """A ``threading.Lock`` for ``with``, made anew (free) in a forked child.

    A fork while another thread held a plain lock would leave the child's copy locked for good
    (that thread is not copied): module-level guards and those of objects a child inherits
    (a cached function, a metrics observer) use this instead."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        _process_locks.add(self)

    def __enter__(self) -> None:
        self._lock.acquire()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.release()


_process_locks: weakref.WeakSet[ProcessLock] = weakref.WeakSet()


def _free_process_locks() -> None:
    for lock in list(_process_locks):
        lock._lock = threading.Lock()


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_free_process_locks)


class Mutex:
    """A process-local mutex for threads: a lock handle's users queue on it.

    A forked child starts with a free one (its parent's threads are not in it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pid = pid()

    def acquire(self, timeout: float | None) -> bool:
        """Take the mutex within ``timeout`` seconds (``None``: no limit)."""
        if self._pid != pid():
            self._lock, self._pid = threading.Lock(), pid()
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(timeout=min(max(timeout, 0.0), threading.TIMEOUT_MAX))

    def release(self) -> None:
        self._lock.release()


class AsyncBackground:
    """A background task of the running event loop (the watchdog, the waiter hub's reader)."""

    OWNER = "task"
    """What acquired a lock (RLock re-entry is per task), in error messages."""
    HOLDER = "event loop"
    """What may release or extend a held lock (any task of its loop), in error messages."""
    ASYNC = True
    """Coroutine callbacks can be run (on the lock's event loop)."""
    LEADS = False
    """A waiter does not read its hub's subscription itself: the reader task wakes it with a
    task switch, which costs little (see ``AsyncHub.wait``)."""

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


class AsyncAtShutdown:
    """Runs a clean-up when the event loop shuts down, unless :meth:`aclose` came first.

    ``asyncio.run()`` (and every runner that calls ``loop.shutdown_asyncgens()``) closes the
    asynchronous generators still open on its loop after cancelling the tasks, while the loop
    still runs: a suspended generator whose ``finally`` awaits the clean-up is the documented
    way to be told. So a client that is never passed to ``close()`` still has its private
    connections closed when the loop ends, before they could be reported as unclosed.
    """

    def __init__(self, cleanup: Callable[[], Awaitable[None]]) -> None:
        self._cleanup: Callable[[], Awaitable[None]] | None = None
        if sys.get_asyncgen_hooks().firstiter is None:
            return  # a loop that does not track its generators: close() is the only way
        self._cleanup = cleanup
        self._agen = self._until_shutdown()
        step: Any = self._agen.__anext__()  # the loop's firstiter hook registers it
        with contextlib.suppress(StopIteration):
            step.send(None)  # runs to the yield without suspending (nothing is awaited)

    async def _until_shutdown(self) -> AsyncGenerator[None, None]:
        try:
            yield
        finally:
            cleanup, self._cleanup = self._cleanup, None
            if cleanup is not None:
                with contextlib.suppress(Exception):
                    await cleanup()

    async def aclose(self) -> None:
        """Forget the clean-up (it was done another way) and let the loop forget us."""
        if self._cleanup is not None:
            self._cleanup = None
            await self._agen.aclose()


class AtShutdown:
    """Nothing to do at shutdown for threads: they are daemons, and the garbage collector
    closes the connections of a client that is gone."""

    def __init__(self, cleanup: Callable[[], None]) -> None:
        pass

    def close(self) -> None:
        """Nothing to forget."""


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
    """Runs the ``on_lost`` callbacks of one watchdog off its thread: one daemon thread fed by
    a queue, started on the first callback and ending after ``linger`` seconds without one,
    so a callback that blocks delays only the callbacks after it, never a renewal.
    :meth:`close` ends it once what was queued has run (waiting a bounded time)."""

    def __init__(self, *, linger: float = 1.0) -> None:
        self._linger = linger
        self._queue: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    def submit(self, callback: Callable[[], object]) -> None:
        """Run ``callback`` soon, in the callback thread (its errors are logged)."""
        with self._guard:
            self._queue.put(callback)
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="redlease-callbacks", daemon=True
                )
                self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                callback = self._queue.get(timeout=self._linger)
            except queue.Empty:
                with self._guard:
                    if self._queue.empty():  # (else one came meanwhile: run it)
                        if self._thread is threading.current_thread():
                            self._thread = None
                        return
                continue
            if callback is None:  # close(): what was queued before it has run
                return
            Background.call(callback)
            del callback  # a callback that ran keeps nothing alive while this thread waits

    def close(self, timeout: float | None) -> None:
        """End the thread once the callbacks queued so far have run; wait for it at most
        ``timeout`` seconds (a callback that blocks longer is left to finish alone)."""
        with self._guard:
            thread, self._thread = self._thread, None
            if thread is not None:
                self._queue.put(None)
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)


MIN_BUDGET = 0.005
"""Seconds below which a clean-up is not worth waiting for: it goes to the background."""


class AsyncShield:
    """Clean-up that survives the cancellation of the task that started it, within a bound.

    A public call may take the caller's timeout plus at most one socket timeout, clean-up
    included; what cannot finish within that is handed to the background, never awaited
    past the bound (see :func:`redlease._core.bounds.budget`).
    """

    @staticmethod
    async def cleanup(
        action: Callable[[float | None], Awaitable[Any]], budget: float | None
    ) -> None:
        """Best effort, errors ignored: run ``action(budget)`` and wait for it at most
        ``budget`` seconds (``None``: as long as it takes); past that, or if this task is
        cancelled meanwhile, it goes on in the background."""
        if budget is not None and budget < MIN_BUDGET:
            AsyncShield.background(action)
            return
        task = _spawn(action, budget)
        # Past the budget it goes on by itself, bounded by its own reply timeouts.
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.shield(task), budget)

    @staticmethod
    def background(action: Callable[[float | None], Awaitable[Any]]) -> None:
        """Run ``action(None)`` in a task of its own, not awaited (errors ignored)."""
        _spawn(action, None)


def _spawn(action: Callable[[float | None], Awaitable[Any]], timeout: float | None) -> Any:
    async def run() -> None:
        with contextlib.suppress(Exception):  # best effort: the lease expires anyway
            await action(timeout)

    task = asyncio.get_running_loop().create_task(run(), name="redlease-cleanup")
    _cleanups.add(task)
    task.add_done_callback(_cleanups.discard)
    return task


class Shield:
    """Clean-up within a bound. Threads are not cancelled and a blocking call cannot be
    interrupted, so bounded clean-up runs in a short-lived thread that is waited for at most
    the bound; past it, it goes on alone (it ends within its own connect and reply timeouts).
    """

    @staticmethod
    def cleanup(action: Callable[[float | None], Any], budget: float | None) -> None:
        """Best effort, errors ignored: run ``action(budget)`` and wait for it at most
        ``budget`` seconds (``None``: here, as long as it takes)."""
        if budget is None:
            with contextlib.suppress(Exception):  # best effort: the lease expires anyway
                action(None)
            return
        thread = Shield._start(action, budget)
        if budget >= MIN_BUDGET:
            thread.join(budget)

    @staticmethod
    def background(action: Callable[[float | None], Any]) -> None:
        """Run ``action(None)`` in a daemon thread (it ends within a socket timeout)."""
        Shield._start(action, None)

    @staticmethod
    def _start(action: Callable[[float | None], Any], timeout: float | None) -> threading.Thread:
        def run() -> None:
            with contextlib.suppress(Exception):
                action(timeout)

        thread = threading.Thread(target=run, name="redlease-cleanup", daemon=True)
        thread.start()
        return thread
