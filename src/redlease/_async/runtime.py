"""What one client shares within one process (or event loop): watchdog, waiter hub, holdings.

The runtime hangs off the client object itself, so it lives exactly as long as the client and
needs no global registry. A forked child (sync) or another event loop (asyncio) gets its own.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import redis.asyncio

from .._core.lease import Holding
from .._synchronization import AsyncBackground
from .client import private_pool
from .hub import AsyncHub
from .renewer import AsyncRenewer, renew_on

__all__ = ["AsyncRuntime", "runtime_for"]

_ATTRIBUTE = "_redlease_runtime"
_guard = threading.Lock()


class AsyncRuntime:
    """The script pool, the watchdog, the waiter hub and the holdings of one client."""

    def __init__(self, client: redis.asyncio.Redis) -> None:
        self.scope = AsyncBackground.scope()
        self._client = client
        self.pool = private_pool(client)  # scripts run here: one try each, no hidden retries
        self.renewer = AsyncRenewer(renew_on(self.pool))
        self.hub = AsyncHub(redis.asyncio.Redis(connection_pool=private_pool(client)))
        self._timed: dict[float, Any] = {}
        # Renewers of Redlocks whose first server is this client, by their servers.
        self.redlock_renewers: dict[tuple[Any, ...], AsyncRenewer] = {}
        # Lock key -> the holding of this process: for RLock re-entry and self-deadlock checks.
        self.holdings: weakref.WeakValueDictionary[bytes, Holding] = (
            weakref.WeakValueDictionary()
        )


    def timed_pool(self, timeout: float) -> Any:
        """A private pool whose connections connect and answer within ``timeout`` seconds."""
        pool = self._timed.get(timeout)
        if pool is None:
            pool = self._timed[timeout] = private_pool(self._client, timeout)
        return pool


def runtime_for(client: redis.asyncio.Redis) -> AsyncRuntime:
    """The runtime of ``client`` in the current scope, created on first use."""
    scope = AsyncBackground.scope()
    runtime = getattr(client, _ATTRIBUTE, None)
    if isinstance(runtime, AsyncRuntime) and runtime.scope == scope:
        return runtime
    with _guard:
        runtime = getattr(client, _ATTRIBUTE, None)
        if isinstance(runtime, AsyncRuntime) and runtime.scope == scope:
            return runtime
        fresh = AsyncRuntime(client)
        setattr(client, _ATTRIBUTE, fresh)
        return fresh
