"""What one client shares within one process (or event loop): backend, watchdog, waiter hub.

The runtime hangs off the client object itself, so it lives exactly as long as the client and
needs no global registry. A forked child (sync) or another event loop (asyncio) gets its own.
:func:`detach` takes it off the client (``redlease.close()``), and the next use makes a new one.
"""

from __future__ import annotations

import time
import weakref
from typing import Any

from .. import _observe
from .._core.keys import hash_tag
from .._core.lease import Holding, process_id
from .._core.waiters import WAITERS
from .._synchronization import AsyncAtShutdown, AsyncBackground, ProcessLock
from .cluster import cluster_backend
from .hub import AsyncHub
from .one_server import standalone_backend
from .renewer import AsyncRenewer
from .server import AsyncRenewal, AsyncServer

__all__ = ["AsyncRuntime", "backend_for", "detach", "runtime_for"]

_ATTRIBUTE = "_redlease_runtime"
_guard = ProcessLock()


class AsyncRuntime:
    """The backend, the watchdog, the waiter hub and the holdings of one client."""

    def __init__(self, backend: AsyncServer) -> None:
        self.scope = AsyncBackground.scope()
        self.backend = backend
        # How holdings on this server (or cluster) are renewed.
        self.renewal: AsyncRenewal = backend.renewal()
        self.renewer = AsyncRenewer()
        self.hub = AsyncHub(backend)
        # Cluster only: one hub per lock, on a sharded channel in the lock's slot.
        self._hubs: weakref.WeakValueDictionary[bytes, AsyncHub] = weakref.WeakValueDictionary()
        # Lock key -> the holding of this process: for RLock re-entry and self-deadlock checks.
        self.holdings: weakref.WeakValueDictionary[bytes, Holding] = weakref.WeakValueDictionary()
        self.closed = False
        self.client_ref: weakref.ref[Any] | None = None
        # asyncio: closed when the event loop shuts down, should close() never be called.
        self._at_shutdown = AsyncAtShutdown(self._shutdown)

    async def aclose(self) -> None:
        """Close what redlease made for the client: watchdog, waiter hub, private connections.

        Leases still held are not released (their holders may still be at work): they are no
        longer renewed, each is logged (``held_at_close``), and runs out within its lease
        unless its holder releases it first. Waits at most one socket timeout (5 s if none)
        for a background thread in the middle of a call.
        """
        if self.closed:
            return
        self.closed = True
        self.backend.closed = True  # first: a waiter woken below must not subscribe again
        await self._at_shutdown.aclose()
        if self.scope != AsyncBackground.scope():
            return  # another process' or event loop's: nothing of it can be closed from here
        bound = self.backend.socket_timeout or 5.0
        held = self.renewer.stop()
        held_ids = {id(h) for h in held}
        held += [h for h in list(self.holdings.values()) if h.active and id(h) not in held_ids]
        await self.hub.aclose(bound)
        for hub in list(self._hubs.values()):  # a Cluster's per-lock hubs
            await hub.aclose(bound)
        await self.backend.aclose()  # cuts short a renewal still waiting for its reply
        await self.renewer.join(bound)
        await self.backend.aclose()  # again: a call cut short may have reconnected its socket
        now = time.monotonic()
        for holding in held:
            if holding.active:
                _observe.held_at_close(holding, holding.expires_at - now)

    async def _shutdown(self) -> None:
        detach(self)
        await self.aclose()

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


def backend_for(client: Any, arg: str = "client") -> AsyncServer:
    """A new backend for ``client``: a Cluster's, or one server's (checked as
    ``flavor.check_client`` does)."""
    backend = cluster_backend(client)
    return backend if backend is not None else standalone_backend(client, arg)


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
        fresh.client_ref = weakref.ref(client)
        setattr(client, _ATTRIBUTE, fresh)
        return fresh


def detach(target: Any) -> AsyncRuntime | None:
    """Take the runtime off its client (``target``: the client, or the runtime itself);
    returns it, or ``None`` if the client had none. The client's next use makes a new one."""
    with _guard:
        if isinstance(target, AsyncRuntime):
            runtime: AsyncRuntime | None = target
            client = target.client_ref() if target.client_ref is not None else None
        else:
            client = target
            runtime = getattr(client, _ATTRIBUTE, None)
        if runtime is not None and getattr(client, _ATTRIBUTE, None) is runtime:
            delattr(client, _ATTRIBUTE)
    return runtime if isinstance(runtime, AsyncRuntime) else None
