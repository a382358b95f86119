"""Celery beat on every host, one sending: ``celery beat -S redlease.celery_beat:BeatScheduler``.

::

    app.conf.beat_redlease_url = "redis://localhost:6379/0"  # else ONCE's url, else the broker
    app.conf.beat_redlease_lease = 10.0  # seconds a dead leader holds on

Every beat campaigns in one :class:`~redlease.Election` (``beat_redlease_name``, default
``"celery-beat"``); the leader runs beat's schedule, the others stand by, asking every quarter
lease, and one of them takes over within the lease after the leader died (kill -9). Each fire
is sent under a :class:`~redlease.Once` keyed by the entry's name and its scheduled instant, as
the leader's local clock places it (an interval entry's instants are the multiples of its period
since the epoch; a crontab's, the minute): a leader that takes over does not send an instant
sent before the failover. The lease is on the Redis server's clock; the instants are on the
leader's: hosts whose clocks disagree may send an instant near a failover that the other
clock would call the neighbour of one sent (never the same one twice). When Redis cannot be
reached, nothing is sent (the fire is skipped, never sent twice). The header
``redlease_beat_instant`` (epoch seconds) reaches the task as
``self.request.redlease_beat_instant``.

Settings (``app.conf``): ``beat_redlease_url`` or ``beat_redlease_client`` (a redis-py client;
default: ``app.conf.ONCE["settings"]``'s, else the broker url), ``beat_redlease_lease`` (10 s),
``beat_redlease_prefix`` (``"redlease"``), ``beat_redlease_name``, ``beat_redlease_keep``
(seconds a fire's key is kept: 3600). Needs the extra ``redlease[celery]``.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import socket
import time
from datetime import timedelta
from typing import Any

import redis
from celery import beat
from celery.schedules import crontab

from ._core import validate
from ._core.once import OnceKeys
from ._sync.election import Election
from ._sync.once import Once
from .errors import RedleaseError

__all__ = ["INSTANT_HEADER", "BeatScheduler", "scheduled_instant"]

INSTANT_HEADER = "redlease_beat_instant"
_log = logging.getLogger("redlease.celery_beat")


def scheduled_instant(schedule: Any, now: float) -> float:
    """The instant (epoch seconds) a fire at ``now`` stands for: the latest multiple of an
    interval's period, the minute of a crontab, else the second."""
    period = 1.0
    run_every = getattr(schedule, "run_every", None)
    if isinstance(schedule, crontab):
        period = 60.0
    elif isinstance(run_every, timedelta) and run_every.total_seconds() > 0:
        period = run_every.total_seconds()
    return math.floor(now / period) * period


class BeatScheduler(beat.Scheduler):  # type: ignore[misc]
    """A beat scheduler that sends only while it leads, each instant once (see the module)."""

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        conf = app.conf
        once = ((conf.get("ONCE") or {}).get("settings")) or {}
        lease = float(conf.get("beat_redlease_lease") or 10.0)
        if not lease > 0:
            raise ValueError(f"beat_redlease_lease must be > 0, got {lease!r}")
        keep = float(conf.get("beat_redlease_keep") or 3600.0)
        if not keep > 0:
            raise ValueError(f"beat_redlease_keep must be > 0, got {keep!r}")
        client = conf.get("beat_redlease_client") or once.get("client")
        if client is None:
            url = conf.get("beat_redlease_url") or once.get("url") or conf.broker_url
            if not url or not str(url).startswith(("redis://", "rediss://", "unix://")):
                raise ValueError(f"beat_redlease_url must be a redis:// url, got {url!r}")
            client = redis.Redis.from_url(url)
        self.redlease_client: redis.Redis = client
        self.redlease_lease = lease
        self.redlease_keep = keep
        self.redlease_prefix = str(conf.get("beat_redlease_prefix") or "redlease")
        self.redlease_name = str(conf.get("beat_redlease_name") or "celery-beat")
        self.election = Election(
            client, self.redlease_name, ttl=lease, prefix=self.redlease_prefix, on_lost=self._lost
        )
        self._leading = False
        super().__init__(app, *args, **kwargs)

    def _lost(self) -> None:
        _log.warning("beat %s lost its leadership (Redis unreachable?)", self.redlease_name)
        self._leading = False

    def _lead(self) -> bool:
        if self._leading:
            return True
        if self.election.term is not None:  # lost, still held by the handle: start over
            with contextlib.suppress(RedleaseError):
                self.election.resign()
        value = f"{socket.gethostname()}:{os.getpid()}"
        try:
            self._leading = self.election.campaign(value, timeout=0)
        except RedleaseError as exc:
            _log.warning("beat could not campaign: %s", exc)
            return False
        if self._leading:
            _log.warning(
                "beat %s: %s leads (term %s)", self.redlease_name, value, self.election.term
            )
            self._heap = None  # start from the schedule as it is now
        return self._leading

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Beat's tick while leading; else a try to lead, and a quarter lease of waiting."""
        if not self._lead():
            return min(self.redlease_lease / 4, float(self.max_interval))
        interval: float = super().tick(*args, **kwargs)
        return min(interval, self.redlease_lease / 4)

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        """Send the entry's fire unless it was sent (or is being sent) for this instant."""
        instant = scheduled_instant(entry.schedule, time.time())
        once = Once(
            self.redlease_client,
            f"{self.redlease_name}:{entry.name}:{instant:.3f}",
            every=self.redlease_keep,
            ttl=self.redlease_lease,
            prefix=self.redlease_prefix,
        )
        try:
            run = once.try_start() if self._leading else None
        except RedleaseError as exc:
            _log.warning("beat skipped %s at %s, Redis failed: %s", entry.name, instant, exc)
            return
        if run is None:
            _log.debug("beat skipped %s at %s: sent already", entry.name, instant)
            return
        entry.options = {**entry.options}
        entry.options["headers"] = {**(entry.options.get("headers") or {}), INSTANT_HEADER: instant}
        try:
            self.apply_async(entry, producer=producer, advance=False)
        except Exception as exc:
            _log.error("beat could not send %s: %s", entry.name, exc, exc_info=True)
            _end(run.fail)
        else:
            _end(run.finish)
        self._expire(once.name)

    def _expire(self, name: str | bytes) -> None:
        """A Once keeps its last run and its fence counter for good; here they are two keys per
        fire: make them last ``beat_redlease_keep`` (fences stay increasing without the
        counter, see ``common_lib.lua``)."""
        keys = OnceKeys.build(validate.prefix(self.redlease_prefix), validate.name(name))
        ms = int(self.redlease_keep * 1000)
        try:
            pipe = self.redlease_client.pipeline(transaction=False)
            pipe.pexpire(keys.run, ms)
            pipe.pexpire(keys.fence, ms)
            pipe.execute()
        except redis.RedisError as exc:  # the keys only outlive their use
            _log.warning("could not set the expiry of %r: %s", keys.run, exc)

    def close(self) -> None:
        if self._leading:
            self._leading = False
            try:
                self.election.resign()
            except RedleaseError as exc:
                _log.warning("beat could not resign: %s", exc)
        super().close()


def _end(action: Any) -> None:
    try:
        action()
    except RedleaseError as exc:  # its key expires with the lease
        _log.warning("beat could not record a fire: %s", exc)
