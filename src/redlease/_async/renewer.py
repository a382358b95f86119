"""The watchdog: one per client and process (event loop), renewing every lease held through it.

It wakes when the next renewal is due and renews everything due, one round trip per batch:
holdings are batched by their renewal target and script (see :func:`~redlease._core.renewals.
batches`), so a mutex, a permit, a read share or an election term is each renewed by its own
script, and a Redlock on its own servers. It marks the holdings it finds gone as lost (their
``on_lost`` runs off its path: see ``AsyncCallbacks``), and exits once nothing has been left to
renew for ``linger`` seconds, so no thread or task outlives the leases it serves for long.

A renewal target is anything with ``renew(script, holdings)`` (``server.AsyncRenewal``),
which answers per holding (renewed or lost) or raises when it cannot tell; each backend names
its own (``backend.renewal()``: ``server_renewal.py``, ``cluster_renewal.py``), and
``AsyncQuorumRenewal`` in ``redlock.py`` renews on a majority of N. Renewals, failures and
lost leases are logged and measured through :mod:`redlease._observe`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .. import _observe
from .._core import renewals
from .._core.kept import forget_frames
from .._core.lease import Holding
from .._core.renewals import RenewSchedule
from .._core.scripts import Script
from .._synchronization import AsyncBackground, AsyncCallbacks, AsyncEvent
from .server_renewal import AsyncServerRenewal

__all__ = ["AsyncRenewer", "AsyncServerRenewal", "forget_frames"]

RETRY = 0.5
"""Seconds before a renewal that failed (Redis error) is tried again."""


class AsyncRenewer:
    """Renews the holdings added to it until they are released, lost or dropped."""

    def __init__(self, *, linger: float = 1.0) -> None:
        self._linger = linger
        self._schedule = RenewSchedule()
        self._guard = threading.Lock()
        self._wake = AsyncEvent()
        self._worker: AsyncBackground | None = None
        self._sleep_until = 0.0
        self._closed = False
        self._stopping: AsyncBackground | None = None  # the worker told to end by stop()
        # on_lost runs here, off the watchdog's path: a callback that blocks or fails costs
        # the other leases nothing.
        self._callbacks = AsyncCallbacks()

    def add(self, holding: Holding) -> None:
        """Start renewing ``holding`` (acquired just now)."""
        with self._guard:
            now = time.monotonic()
            if self._closed:  # acquired while redlease was being closed: held at close
                holding.renewed = False
                _observe.held_at_close(holding, holding.expires_at - now)
                return
            due = now + holding.ttl_ms / 3000
            self._schedule.add(holding, now)
            if self._worker is None:
                self._worker = AsyncBackground(self._run, name="redlease-renewer")
            elif due < self._sleep_until:
                self._wake.set()

    def release(self, holding: Holding) -> bool:
        """Stop renewing ``holding`` and mark it released, before the release is sent.

        Returns False if the watchdog had already found it lost. A renewal already on its way
        cannot extend the lock after the release: renew.lua compares the token first.
        """
        with self._guard:
            self._schedule.discard(holding)  # no wake: the worker notices at its next tick
            lost = holding.lost
            holding.released = True
            return not lost

    def stop(self) -> list[Holding]:
        """Stop renewing for good and tell the watchdog to end (see :meth:`join`); returns
        the holdings it was renewing."""
        with self._guard:
            self._closed = True
            held = self._schedule.drain()
            worker, self._worker = self._worker, None
            self._stopping = worker
        for holding in held:
            holding.renewed = False
        self._wake.set()
        if worker is not None:
            worker.cancel()
        return held

    async def join(self, timeout: float | None) -> None:
        """After :meth:`stop`: wait until the watchdog, and the ``on_lost`` callbacks it
        started, have ended, at most ``timeout`` seconds (a thread in the middle of a
        renewal ends when its reply comes or its call fails; a callback still running is
        left to finish alone, or cancelled in asyncio)."""
        end = None if timeout is None else time.monotonic() + timeout
        worker, self._stopping = self._stopping, None
        if worker is not None:
            await worker.join(timeout)
        left = None if end is None else max(end - time.monotonic(), 0.0)
        await self._callbacks.aclose(left)

    def notify(self, callback: Callable[[], object] | None) -> None:
        """Run a lost holding's ``on_lost`` (``None``: none) off the caller's path, as the
        watchdog does: a callback that blocks or raises costs the caller nothing."""
        if callback is not None:
            self._callbacks.submit(callback)

    async def _run(self) -> None:
        idle_since: float | None = None
        while True:
            callbacks: list[Callable[[], object] | None] = []
            expired: list[Holding] = []
            with self._guard:
                if self._closed:
                    return
                now = time.monotonic()
                for holding in self._schedule.expired(now):
                    if holding.active:
                        expired.append(holding)
                    callbacks.append(holding.mark_lost())
                due = self._schedule.take_due(now)
                next_due = self._schedule.next_due()
                if due or next_due is not None:
                    idle_since = None
                    sleep = 0.0 if due else max(0.0, next_due - now)  # type: ignore[operator]
                else:
                    idle_since = now if idle_since is None else idle_since
                    sleep = self._linger - (now - idle_since)
                    if sleep <= 0:
                        self._worker = None
                        return
                self._sleep_until = now + sleep
            for holding in expired:
                _observe.lost(holding, "expired")
            self._run_lost(callbacks)
            if due:
                await self._renew(due)
                # Let go before the schedule is read again: a dropped handle's holding, kept
                # alive by this list, would be found due again (renewal after renewal while
                # rounds take their deadline), and renewed for ever.
                due = []
            else:
                await self._wake.wait(sleep)
                self._wake.clear()

    async def _renew(self, due: list[Holding]) -> None:
        for target, script, batch in renewals.batches(due):
            for group in renewals.by_end(batch, time.monotonic()):
                await self._renew_batch(target, script, group)

    async def _renew_batch(self, target: Any, script: Script, due: list[Holding]) -> None:
        sent = time.monotonic()
        try:
            renewed = await target.renew(script, due)
        except Exception as exc:  # no answer (or nonsense): try again soon, until it is over
            with self._guard:
                if self._closed:
                    return
                delays = [min(RETRY, h.ttl_ms / 3000) for h in due]
                for h, delay in zip(due, delays, strict=True):  # until surely over: expired()
                    self._schedule.add(h, sent, delay=delay)
            _observe.renewal_failed(due, exc, min(delays))
            forget_frames(exc)
            return
        callbacks: list[Callable[[], object] | None] = []
        done: list[Holding] = []
        gone: list[Holding] = []
        with self._guard:
            for h, ok in zip(due, renewed, strict=True):
                if not h.active:
                    continue  # released while the renewal was on its way
                if ok:
                    h.extended(sent, h.ttl_ms)
                    done.append(h)
                    if not self._closed:
                        self._schedule.add(h, sent)
                else:
                    self._schedule.discard(h)
                    gone.append(h)
                    callbacks.append(h.mark_lost())
        _observe.renewed(done)
        for h in gone:
            _observe.lost(h, "gone")
        self._run_lost(callbacks)

    def _run_lost(self, callbacks: list[Callable[[], object] | None]) -> None:
        """Hand the ``on_lost`` callbacks of lost holdings to the callback runner: the
        watchdog never waits for one, and their errors are logged there."""
        for callback in callbacks:
            self.notify(callback)
