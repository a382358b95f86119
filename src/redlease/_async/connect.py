"""Opening a backend's connections: its private pool, each connection's handshake, and the
server's eviction policy, read on the first connection.

redlease does not send its scripts through your client's command path: redis-py 8 retries a
failed call several times with backoff (seconds against a dead server), and a lock must fail
within the caller's timeout plus one socket timeout. A backend keeps a small pool of its own,
built from your client's connection class and settings (host, TLS, auth, Sentinel, timeouts)
with client-side retries turned off.
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from typing import Any, Protocol

from redis.exceptions import ResponseError

from .. import _observe
from .._core import eviction
from .._logging import record
from .._redispy_versions import AsyncConnections, private_kwargs
from .flavor import Flavor, translate
from .server import connect_deadline

__all__ = ["MIN_HANDSHAKE", "AsyncEvictionCheck", "Graced", "private_pool"]

MIN_HANDSHAKE = 0.01
"""The least time a handshake is given under :func:`connecting_by`, however late it starts."""


class Graced(Protocol):
    """A server whose new connections may get the connect timeout for their handshake."""

    def graced(self) -> bool: ...


class AsyncEvictionCheck:
    """Once per server (the first connection's handshake): warn if its maxmemory-policy may
    evict keys (``eviction_possible``)."""

    def __init__(self, foreign: tuple[type[BaseException], ...], address: str) -> None:
        self.done = False  # its maxmemory-policy was read
        self._foreign = foreign
        self._address = address

    async def __call__(self, conn: Any) -> None:
        """Ask on ``conn``. A refused CONFIG GET (an ACL without it, a managed service that
        renamed it) is no error: logged at DEBUG, never asked again."""
        address = self._address
        try:
            await AsyncConnections.send(conn, "CONFIG", "GET", "maxmemory-policy")
            reply = await conn.read_response()
        except Exception as exc:
            error = translate(exc) if isinstance(exc, self._foreign) else exc
            if not isinstance(error, ResponseError):
                raise  # the connection failed: the next one asks again
            self.done = True
            record(
                logging.DEBUG,
                "eviction_unknown",
                "Redis server %s did not tell its maxmemory-policy: %s",
                address,
                error,
                server=address,
                error=f"{type(error).__name__}: {error}",
            )
            return
        self.done = True
        policy = eviction.policy_of(reply)
        risk = None if policy is None else eviction.risk(policy)
        if policy is not None and risk is not None:
            _observe.eviction_possible(address, policy, risk)


def private_pool(
    client: Any,
    flavor: Flavor,
    timeout: float | None,
    server: Callable[[], Graced | None],
    check: AsyncEvictionCheck,
) -> Any:
    """A pool like ``client``'s whose connections never retry on their own.

    With ``timeout``, its connections answer within ``timeout`` seconds (Redlock's
    per-server deadline) instead of the client's socket timeout; a new connection gets at
    least a second to connect, so that a loaded but healthy server is not taken for a
    dead one. ``server`` (a weak reference) says whether a handshake gets its grace;
    ``check`` reads the eviction policy until it is done.
    """
    pool: Any = client.connection_pool
    no_retry = flavor.retry_class(flavor.no_backoff(), 0)
    kwargs = private_kwargs(pool, no_retry, timeout)
    # The handshake is part of connecting, not a reply (and is bounded by connecting_by).
    hook = flavor.connect_func
    kwargs[hook] = functools.partial(_handshake, server, check, kwargs.get(hook), timeout)
    return flavor.pool_class(connection_class=pool.connection_class, **kwargs)


async def _handshake(
    server: Callable[[], Graced | None],
    check: AsyncEvictionCheck,
    inner: Any,
    deadline: float | None,
    conn: Any,
) -> None:
    """``redis_connect_func`` of the private pools' connections: the handshake, then, on the
    first connection to the server, its maxmemory-policy (:class:`AsyncEvictionCheck`).

    A deadline backend's (``deadline`` set) handshake replies within the connect timeout (a
    loaded or briefly paused server is not a dead one), unless the server is known not to
    answer (then within the deadline, as any reply); others within the socket timeout. Both
    at most until the :func:`connecting_by` deadline, if one is set."""
    backend = server()
    limit = conn.socket_timeout
    if deadline is not None and backend is not None and backend.graced():
        limit = conn.socket_connect_timeout
    by = connect_deadline()
    if by is not None:
        left = max(by - time.monotonic(), MIN_HANDSHAKE)
        limit = left if limit is None else min(limit, left)
    await AsyncConnections.handshake(conn, limit, inner)
    if backend is not None and not check.done:
        await AsyncConnections.handshake(conn, limit, check)
