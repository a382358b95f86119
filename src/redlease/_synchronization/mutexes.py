"""Process-local mutexes a forked child starts with free: for tasks, for threads, for ``with``."""

from __future__ import annotations

import asyncio
import os
import threading
import weakref

from .._core.lease import pid

__all__ = ["AsyncMutex", "Mutex", "ProcessLock"]


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

    def free(self) -> None:
        """Forget the lock for a new, free one (in a forked child, at once after the fork)."""
        self._lock = threading.Lock()


_process_locks: weakref.WeakSet[ProcessLock] = weakref.WeakSet()


def _free_process_locks() -> None:
    for lock in list(_process_locks):
        lock.free()


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
