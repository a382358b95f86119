"""The connections a backend keeps between calls, over its private pool.

Checking a connection out of the pool (a lock, bookkeeping, observability hooks) costs about
as much as the script: a backend checks each out once and keeps it (LIFO, at most
:data:`KEPT`), taken and given back with ``list.pop``/``append``, atomic under the GIL. It
also holds the calls a fan-out left unread (:attr:`AsyncKeeper.parked`). A forked child
never uses its parent's sockets.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from .._core.lease import pid
from .._redispy_versions import AsyncConnections
from .server import Pending

__all__ = ["KEPT", "TRUSTED", "AsyncKeeper"]

KEPT = 8
"""The most idle connections a backend keeps between calls (more go back to its pool)."""
TRUSTED = 0.01
"""Seconds after a reply in which a kept connection is reused unchecked; a server that closed it
meanwhile fails that one call."""


class AsyncKeeper:
    """One backend's connections: its private ``pool``, the idle ones kept, the parked calls."""

    def __init__(self, pool: Any) -> None:
        self.pool = pool
        # (connection, when it was given back: see TRUSTED), most recent last
        self.kept: list[tuple[Any, float]] = []
        self._pid = pid()
        # Fan-outs: calls whose replies were not read when they returned (a majority had
        # answered, or the server was late): sync, their Pendings, which the next fan-out
        # here reads or sends behind; asyncio, the tasks still reading them (_fanout.py).
        self.parked: list[Any] = []
        # Weak-reference callbacks run before the collector finalizes a cycle's objects.
        weakref.finalize(self, _forget_parked, self.parked)
        weakref.finalize(self, _forget_kept, self.kept)

    async def checkout(self, translated: Callable[[], AbstractContextManager[None]]) -> Any:
        """A connection for one call: a kept one (the hot path: no I/O, no context manager),
        else a new one from the pool, its errors raised within ``translated()``."""
        if self._pid != pid():  # a forked child: never use the parent's sockets
            self.kept.clear()
            self.parked.clear()
            self._pid = pid()
        while True:
            try:
                conn, since = self.kept.pop()
            except IndexError:
                with translated():
                    return await AsyncConnections.get(self.pool)
            if time.monotonic() - since < TRUSTED or not await AsyncConnections.stale(conn):
                return conn
            with translated():
                await self.discard(conn)  # closed by the server while idle: the next one

    async def checkin(self, conn: Any, closed: bool) -> None:
        """Keep a connection whose last reply was read whole, for the next call (back to the
        pool instead if enough are kept, or ``closed``)."""
        if len(self.kept) < KEPT and not closed and self._pid == pid():
            self.kept.append((conn, time.monotonic()))
        else:
            await self.pool.release(conn)

    async def discard(self, conn: Any) -> None:
        """Close a connection that may be out of sync, and give it back to the pool."""
        try:
            await AsyncConnections.drop(conn)
        finally:
            await self.pool.release(conn)

    def idle(self) -> bool:
        """Whether a connection is open for the next call (one kept, or a parked call's)."""
        return bool(self.kept or self.parked)

    def parked_calls(self) -> list[Any]:
        """:attr:`parked`, emptied first in a forked child (the parent's sockets)."""
        if self._pid != pid():
            self.parked.clear()
        return self.parked

    async def aclose(self) -> None:
        """Forget the kept connections and parked calls, and disconnect the pool (connections
        in use too, cutting short what they were waiting for)."""
        self.kept.clear()  # checked out of the pool: disconnected with it below
        self.parked.clear()
        await self.pool.disconnect()


def _forget_kept(kept: list[tuple[Any, float]]) -> None:
    """At garbage collection of a keeper: close its kept connections."""
    AsyncConnections.forget([conn for conn, _ in kept])
    kept.clear()


def _forget_parked(parked: list[Any]) -> None:
    """At garbage collection of a keeper: close the connections of its parked calls too."""
    AsyncConnections.forget([call.conn for call in parked if isinstance(call, Pending)])
    parked.clear()
