"""Events a task or a thread waits on, with a timeout."""

from __future__ import annotations

import asyncio
import threading

__all__ = ["AsyncEvent", "Event"]


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
