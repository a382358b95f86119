"""What one client shares within one process (or event loop): backend, watchdog, waiter hub.

The runtime hangs off the client object itself, so it lives exactly as long as the client and
needs no global registry. A forked child (sync) or another event loop (asyncio) gets its own.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .._core.lease import Holding
from .._synchronization import AsyncBackground
from .client import AsyncBackend, backend_for
from .hub import AsyncHub
from .renewer import AsyncRenewer, AsyncServerRenewal

__all__ = ["AsyncRuntime", "runtime_for"]

_ATTRIBUTE = "_redlease_runtime"
_guard = threading.Lock()


class AsyncRuntime:
    """The backend, the watchdog, the waiter hub and the holdings of one client."""

    def __init__(self, backend: AsyncBackend) -> None:
        self.scope = AsyncBackground.scope()
        self.backend = backend
        self.renewal = AsyncServerRenewal(backend)  # how holdings on this server are renewed
        self.renewer = AsyncRenewer()
        self.hub = AsyncHub(backend)
        # Lock key -> the holding of this process: for RLock re-entry and self-deadlock checks.
        self.holdings: weakref.WeakValueDictionary[bytes, Holding] = weakref.WeakValueDictionary()


def runtime_for(client: Any) -> AsyncRuntime:
    """The runtime of ``client`` in the current scope, created on first use."""
    scope = AsyncBackground.scope()
    runtime = getattr(client, _ATTRIBUTE, None)
    if isinstance(runtime, AsyncRuntime) and runtime.scope == scope:
        return runtime
    with _guard:
        runtime = getattr(client, _ATTRIBUTE, None)
        if isinstance(runtime, AsyncRuntime) and runtime.scope == scope:
            return runtime
        fresh = AsyncRuntime(backend_for(client))
        setattr(client, _ATTRIBUTE, fresh)
        return fresh
