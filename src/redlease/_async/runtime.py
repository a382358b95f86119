"""What one client shares within one process (or event loop): backend, watchdog, waiter hub.

The runtime hangs off the client object itself, so it lives exactly as long as the client and
needs no global registry. A forked child (sync) or another event loop (asyncio) gets its own.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from .._core.keys import hash_tag
from .._core.lease import Holding, process_id
from .._core.waiters import WAITERS
from .._synchronization import AsyncBackground
from .client import AsyncBackend, backend_for
from .cluster import AsyncClusterBackend, AsyncClusterRenewal
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
        # How holdings on this server (or cluster) are renewed.
        self.renewal: AsyncServerRenewal | AsyncClusterRenewal = (
            AsyncClusterRenewal(backend)
            if isinstance(backend, AsyncClusterBackend)
            else AsyncServerRenewal(backend)
        )
        self.renewer = AsyncRenewer()
        self.hub = AsyncHub(backend)
        # Cluster only: one hub per lock, on a sharded channel in the lock's slot.
        self._hubs: weakref.WeakValueDictionary[bytes, AsyncHub] = weakref.WeakValueDictionary()
        # Lock key -> the holding of this process: for RLock re-entry and self-deadlock checks.
        self.holdings: weakref.WeakValueDictionary[bytes, Holding] = weakref.WeakValueDictionary()


    def channels(self, key: bytes) -> bytes:
        """The prefix of the channels on which the scripts of the lock whose key is ``key``
        tell its waiters (they append the process id).

        One server: this process' channel, ``redlease:waiters:`` (PUBLISH). A Cluster:
        ``redlease:waiters:{<tag>}:``, a sharded channel in the lock's own slot (SPUBLISH; see
        ``cluster.py``).
        """
        if not self.backend.sharded:
            return WAITERS
        return WAITERS + b"{" + hash_tag(key) + b"}:"

    def hub_for(self, key: bytes) -> AsyncHub:
        """The waiter hub listening for the waiters of the lock whose key is ``key``: the
        runtime's own on one server, one per lock (and its sharded channel) on a Cluster."""
        if not self.backend.sharded:
            return self.hub
        channels = self.channels(key)
        with _guard:
            hub = self._hubs.get(channels)
            if hub is None:
                hub = AsyncHub(self.backend, channel=channels + process_id())
                self._hubs[channels] = hub
        return hub


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
