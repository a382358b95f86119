"""Fires of scheduled jobs run once across schedulers (``_core/scheduled.py``): the shell of
:mod:`redlease.apscheduler`."""

from __future__ import annotations

import datetime
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

import redis.asyncio

from .. import _observe
from .._core import scheduled as core
from .._core.lease import pid
from .._core.scheduled import Skipped
from .._logging import record
from ..errors import RedleaseError, StaleFence
from .fencing import AsyncFencedStore
from .lock import AsyncLock

__all__ = ["AsyncFires"]

_R = TypeVar("_R")
_Body = Callable[[int], Awaitable["_R"]]  # the job, called with the lock's fence
_PRIMITIVE = "apscheduler"  # the metrics' primitive label: one fire run, or skipped


class AsyncFires:
    """Runs each fire (a job id and a scheduled instant) on one of the schedulers sharing a
    Redis; the others skip it. See :mod:`redlease._core.scheduled` for the keys."""

    def __init__(self, client: redis.asyncio.Redis, *, ttl: float, prefix: str) -> None:
        # A lock handle checks the client, ttl and prefix (it sends nothing).
        AsyncLock(client, core.lock_name("-"), ttl=ttl, prefix=prefix)
        self._client = client
        self.ttl = ttl
        self.prefix = prefix

    async def run(
        self,
        job_id: str,
        run_time: datetime.datetime,
        grace: float | None,
        body: _Body[_R],
    ) -> _R | Skipped:
        """Run ``body`` for the fire ``(job_id, run_time)`` unless another scheduler runs it or
        ran it; wait for the job's lock at most until ``grace`` (the job's misfire grace time)
        runs out. Returns what ``body`` returned, or a :class:`Skipped` saying why not."""
        instant = core.instant_ms(run_time)
        name = core.lock_name(job_id)
        left = core.wait_left(run_time, grace, datetime.datetime.now(datetime.timezone.utc))
        if left < 0:
            return _skip(job_id, instant, core.MISSED, logging.WARNING)
        lock = AsyncLock(
            self._client, name, ttl=self.ttl, prefix=self.prefix, on_lost=_on_lost(job_id, instant)
        )
        sent = time.monotonic()
        try:
            if not await lock.acquire(timeout=left):
                _observe.not_acquired(_PRIMITIVE, job_id, time.monotonic() - sent)
                return _skip(job_id, instant, core.BUSY, logging.DEBUG)
        except RedleaseError as exc:
            return _unavailable(job_id, instant, exc)
        fence = lock.fence
        assert fence is not None  # held
        try:
            return await self._run_held(fence, job_id, instant, sent, body)
        finally:
            try:
                await lock.release()
            except RedleaseError as exc:  # lost, or Redis down: it runs out within ttl
                _warn(job_id, instant, "could not release the job's lock", exc)

    async def _run_held(
        self,
        fence: int,
        job_id: str,
        instant: int,
        sent: float,
        body: _Body[_R],
    ) -> _R | Skipped:
        store = AsyncFencedStore(self._client, core.lock_name(job_id), prefix=self.prefix)
        host = socket.gethostname()
        try:
            decision = core.decide((await store.read()).fields, instant)
            if decision in (core.DONE, core.LATER):
                _observe.not_acquired(_PRIMITIVE, job_id, time.monotonic() - sent)
                return _skip(job_id, instant, decision, logging.DEBUG)
            await store.replace(fence, core.started(instant, host, pid()))
        except StaleFence as exc:  # paused past the lease: a newer holder wrote since
            return _skip(job_id, instant, core.LOST, logging.WARNING, exc)
        except RedleaseError as exc:
            return _unavailable(job_id, instant, exc)
        _observe.acquired(_PRIMITIVE, job_id, time.monotonic() - sent)
        if decision == core.RETRY:
            _warn(job_id, instant, "runs again: its scheduler died (or lost Redis) mid-run")
        try:
            result = await body(fence)
        except Exception:  # it ran (and raised): recorded as done, as APScheduler does not retry
            await _record_done(store, fence, job_id, instant, host)
            raise
        await _record_done(store, fence, job_id, instant, host)
        return result


async def _record_done(
    store: AsyncFencedStore, fence: int, job_id: str, instant: int, host: str
) -> None:
    try:
        await store.replace(fence, core.done(instant, host, pid()))
    except RedleaseError as exc:  # its record stays "running": a waiting scheduler may rerun it
        _warn(job_id, instant, "ran, but could not be recorded as done", exc)


def _skip(
    job_id: str, instant: int, reason: str, level: int, exc: BaseException | None = None
) -> Skipped:
    why = core.REASONS[reason] + (f": {type(exc).__name__}: {exc}" if exc else "")
    record(
        level,
        "fire_skipped",
        "job %r: fire %s skipped here: %s",
        job_id,
        core.label(instant),
        why,
        primitive=_PRIMITIVE,
        name=job_id,
        instant=core.label(instant),
        reason=reason,
    )
    return Skipped(reason, instant)


def _unavailable(job_id: str, instant: int, exc: BaseException) -> Skipped:
    _observe.error(_PRIMITIVE, job_id, "run a fire of", exc)
    return _skip(job_id, instant, core.UNAVAILABLE, logging.WARNING, exc)


def _warn(job_id: str, instant: int, what: str, exc: BaseException | None = None) -> None:
    error = f"{type(exc).__name__}: {exc}" if exc else ""
    record(
        logging.WARNING,
        "fire_trouble",
        "job %r: fire %s %s%s",
        job_id,
        core.label(instant),
        what,
        f": {error}" if error else "",
        primitive=_PRIMITIVE,
        name=job_id,
        instant=core.label(instant),
        error=error,
    )


def _on_lost(job_id: str, instant: int) -> Callable[[], None]:
    def lost() -> None:
        _warn(job_id, instant, "lost its lock while running (Redis unreachable for its ttl?)")

    return lost
