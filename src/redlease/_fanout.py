"""Run one script on N servers at once, each reply bounded by one shared deadline.

The sync and asyncio forms are different algorithms, so both are written here side by side
(``AsyncFanOut`` is what ``_async/`` uses; unasync renames it to ``FanOut`` for ``_sync/``):

* asyncio: one coroutine per server, gathered, each reply bounded by ``timeout``;
* sync: no threads. The command is written to every server first (``backend.send``), then the
  replies are read in turn (``backend.receive``), each within ``timeout`` of when its command
  was sent. One round trip, like the asyncio form; a hung server costs its deadline once, and
  the replies of the others have arrived meanwhile.

Both talk to Redis only through the backends (see ``_async/client.py``). A server that fails
yields its exception in place of its reply; nothing is raised for it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

from ._core.scripts import Script

__all__ = ["AsyncFanOut", "Call", "FanOut"]

Call = tuple[Any, Script, Sequence[bytes], Sequence[Any]]
"""One server's part: (backend, script, keys, args)."""

T = TypeVar("T")
R = TypeVar("R")


class AsyncFanOut:
    """Scripts on N servers at once, with asyncio."""

    @staticmethod
    async def run(calls: Sequence[Call], timeout: float) -> list[Any]:
        """Each call's reply, or the exception it raised, in order; within ``timeout``."""

        async def one(call: Call) -> Any:
            backend, script, keys, args = call
            try:
                return await backend.run(script, keys, args, timeout)
            except Exception as exc:  # a failed server is a vote not cast, not an error
                return exc

        return list(await asyncio.gather(*(one(call) for call in calls)))

    @staticmethod
    async def gather(fn: Callable[[T], Awaitable[R]], items: Sequence[T]) -> list[R | Exception]:
        """``fn(item)`` for every item at once: each result, or the exception it raised."""

        async def one(item: T) -> R | Exception:
            try:
                return await fn(item)
            except Exception as exc:
                return exc

        return list(await asyncio.gather(*(one(item) for item in items)))


class FanOut:
    """Scripts on N servers at once, without threads: write everything, then read."""

    @staticmethod
    def run(calls: Sequence[Call], timeout: float) -> list[Any]:
        """Each call's reply, or the exception it raised, in order; each within ``timeout``."""
        results: list[Any] = [None] * len(calls)
        sent: list[tuple[int, Any, Any]] = []
        for i, (backend, script, keys, args) in enumerate(calls):
            try:
                sent.append((i, backend, backend.send(script, keys, args)))
            except Exception as exc:
                results[i] = exc
        for done, (i, backend, pending) in enumerate(sent):
            try:
                results[i] = backend.receive(pending, timeout)
            except Exception as exc:
                results[i] = exc
            except BaseException:  # interrupted: close the connections not read yet
                for _, other, unread in sent[done + 1 :]:
                    other.abandon(unread)
                raise
        return results

    @staticmethod
    def gather(fn: Callable[[T], R], items: Sequence[T]) -> list[R | Exception]:
        """``fn(item)`` for every item, in turn: each result, or the exception it raised."""
        results: list[R | Exception] = []
        for item in items:
            try:
                results.append(fn(item))
            except Exception as exc:
                results.append(exc)
        return results
