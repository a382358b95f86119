"""Clean-up within a bound (``Shield``), and at the event loop's shutdown (``AtShutdown``)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections.abc import AsyncGenerator, Awaitable, Callable
from typing import Any, TypeVar

__all__ = ["MIN_BUDGET", "AsyncAtShutdown", "AsyncShield", "AtShutdown", "Shield"]

_T = TypeVar("_T")
_running: set[Any] = set()  # clean-up tasks, kept alive until done


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
        # Past the budget it goes on by itself, bounded by its own reply timeouts. (Not
        # wait_for(shield()): on Python 3.10-3.11 it swallows a cancellation that comes as
        # the task ends.)
        await asyncio.wait({task}, timeout=budget)

    @staticmethod
    def background(action: Callable[[float | None], Awaitable[Any]]) -> None:
        """Run ``action(None)`` in a task of its own, not awaited (errors ignored)."""
        _spawn(action, None)

    @staticmethod
    async def through(
        action: Callable[[], Awaitable[_T]], undo: Callable[[_T], Awaitable[Any]]
    ) -> _T:
        """``await action()`` to its end even if the caller is cancelled meanwhile (bounded by
        its own timeouts), then ``undo(result)`` and raise: what it took is given back on
        the connections it used, behind its own commands, before the caller hears it gave up."""
        task = asyncio.ensure_future(action())
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is None:
                await undo(task.result())
            raise

    @staticmethod
    async def apart(action: Callable[[], Awaitable[_T]]) -> _T:
        """``await action()`` in a task of its own, cancelled with the caller.

        A cancellation of the caller then always reaches it: redis-py writes through
        ``asyncio.wait_for``, which on Python 3.10-3.11 swallows a cancellation that comes
        as the write ends."""
        task = asyncio.ensure_future(action())
        try:
            await asyncio.wait({task})
        except BaseException:
            task.cancel()
            raise
        return task.result()


def _spawn(action: Callable[[float | None], Awaitable[Any]], timeout: float | None) -> Any:
    async def run() -> None:
        with contextlib.suppress(Exception):  # best effort: the lease expires anyway
            await action(timeout)

    task = asyncio.get_running_loop().create_task(run(), name="redlease-cleanup")
    _running.add(task)
    task.add_done_callback(_running.discard)
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
        thread = _start(action, budget)
        if budget >= MIN_BUDGET:
            thread.join(budget)

    @staticmethod
    def background(action: Callable[[float | None], Any]) -> None:
        """Run ``action(None)`` in a daemon thread (it ends within a socket timeout)."""
        _start(action, None)

    @staticmethod
    def through(action: Callable[[], _T], undo: Callable[[_T], Any]) -> _T:
        """``action()``: a thread is never cancelled."""
        return action()

    @staticmethod
    def apart(action: Callable[[], _T]) -> _T:
        """``action()``: a thread is never cancelled."""
        return action()


def _start(action: Callable[[float | None], Any], timeout: float | None) -> threading.Thread:
    def run() -> None:
        with contextlib.suppress(Exception):
            action(timeout)

    thread = threading.Thread(target=run, name="redlease-cleanup", daemon=True)
    thread.start()
    return thread
