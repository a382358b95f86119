"""The server interface: what the hub, the renewer, the waiting loop and the primitives ask of
``runtime.backend``.

Two classes implement it: :class:`~redlease._async.one_server.AsyncBackend` (one server, or a
Sentinel master) and :class:`~redlease._async.cluster.AsyncClusterBackend` (a Redis Cluster,
one ``AsyncBackend`` per master). Nothing here does I/O: the interface, the ``Pending`` a
send returns, and the deadline a renewal sets for the handshakes of the connections it opens.
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Protocol

from .._core.lease import Holding
from .._core.scripts import Script

__all__ = [
    "AsyncRenewal",
    "AsyncServer",
    "Pending",
    "connect_deadline",
    "connecting_by",
]


@dataclass
class Pending:
    """A script sent on a connection whose reply has not been read yet."""

    conn: Any
    script: Script
    keys: Sequence[bytes]
    args: Sequence[Any]
    sent_at: float
    answered: bool = False  # its reply was read (set before the connection is given back)
    owed: int = 0  # replies of scripts sent behind it on its connection (see ``follow``)
    before: int = 0  # replies of earlier calls on its connection to read first (``behind``)
    # of those, the scripts sent with EVAL: once their replies are read, the server has them
    evaled: tuple[Script, ...] = ()


class AsyncRenewal(Protocol):
    """A renewal target: renews a batch of holdings, per holding True (renewed) or False
    (lost); raises when it cannot tell."""

    def __hash__(self) -> int: ...  # holdings are batched by their renewal target

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]: ...


class AsyncServer(Protocol):
    """One Redis deployment as redlease uses it: scripts, a subscription, its renewals."""

    sharded: bool
    """Waiters told on a sharded channel in each lock's slot (Cluster), or one per process."""
    closed: bool
    """Set by ``redlease.close()``: every new call raises ``ConnectionError``."""

    @property
    def socket_timeout(self) -> float | None: ...

    async def run(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        timeout: float | None = None,
    ) -> Any: ...

    async def run_acknowledged(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        wait: Sequence[Any],
        wait_timeout: float,
    ) -> tuple[Any, Any]: ...

    async def send(
        self, script: Script, keys: Sequence[bytes], args: Sequence[Any], packed: Any = None
    ) -> Pending: ...

    async def behind(
        self,
        earlier: Pending,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any = None,
    ) -> Pending: ...

    async def receive(self, pending: Pending, timeout: float | None) -> Any: ...

    async def abandon(self, pending: Pending) -> None: ...

    def pubsub(self) -> Any: ...

    def renewal(self) -> AsyncRenewal: ...

    async def identify(self) -> tuple[str, int]: ...

    def with_deadline(self, timeout: float) -> AsyncServer: ...

    async def aclose(self) -> None: ...


_CONNECT_BY: contextvars.ContextVar[float | None] = contextvars.ContextVar(
    "redlease_connect_by", default=None
)


@contextmanager
def connecting_by(deadline: float) -> Iterator[None]:
    """Within the block (this thread, or this task and the tasks it starts), a connection
    opened for a call has its handshake answered by ``deadline`` (monotonic clock), whatever
    the socket timeout: the watchdog's renewals, which are worth nothing once the leases
    they renew have ended. (The TCP connect itself keeps its connect timeout.)"""
    token = _CONNECT_BY.set(deadline)
    try:
        yield
    finally:
        _CONNECT_BY.reset(token)


def connect_deadline() -> float | None:
    """The :func:`connecting_by` deadline in force here, if any."""
    return _CONNECT_BY.get()
