"""Closing what redlease made for a client: ``close(client)`` and ``with closing(client):``.

For each client (and process, or event loop) redlease keeps a few things of its own: a small
pool of private connections, the watchdog that renews leases (a thread, or a task) and the
waiter hub (a pub/sub connection and its reader). They end by themselves once idle, but a
program that is done with a client closes them at once with :func:`close`.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

from .flavor import check_client
from .runtime import detach

__all__ = ["AsyncClosing", "close", "closing"]


async def close(client: object) -> None:
    """Close what redlease made for ``client``: its watchdog, its waiter hub and its private
    connections. Your client itself stays open (it is yours: close it yourself).

    Afterwards no thread (task) and no connection of redlease's is left for this client.
    Closing twice, or a client redlease never used, does nothing.

    Leases still held are **not released**: their holders may still be at work, and a release
    behind their back would let another in at once. They are no longer renewed: each is
    logged as a warning (``held_at_close``) and runs out within its ``ttl``, unless its holder
    releases it first (``release()`` still works). Release your locks before closing.

    Close once your calls on this client are done. A call still in progress in another thread
    or task may fail with the primitive's ``*Unavailable`` error, and whatever it does after
    the close (its clean-up included) reopens what it needs. Using the client with redlease
    again afterwards starts afresh, as a closed redis-py client reconnects: close it again
    when done.

    Waits at most one socket timeout of the client (5 s if it has none) for a background
    thread in the middle of a call. For a :class:`~redlease.Redlock`, close each of its clients.
    """
    check_client(client)
    runtime = detach(client)
    if runtime is not None:
        await runtime.aclose()


class AsyncClosing:
    """What ``closing()`` returns: a context manager that gives the client and calls
    ``close()`` for it on exit."""

    def __init__(self, client: Any) -> None:
        check_client(client)
        self.client = client

    async def __aenter__(self) -> Any:
        return self.client

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await close(self.client)


def closing(client: Any) -> AsyncClosing:
    """``with closing(client) as client:``: :func:`close` the client for redlease on exit.

    Only what redlease made is closed; open and close your client around it, e.g.
    ``with redis.Redis() as r, redlease.closing(r):`` (``async with`` for asyncio).
    """
    return AsyncClosing(client)
