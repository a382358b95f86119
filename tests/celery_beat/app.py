"""The Celery app of the beat tests: ``fire`` every second, each run counted per instant.

``REDLEASE_CELERY_URL`` is broker, backend and lock server; ``PlainInstants`` is beat's own
scheduler with the instant header and no lock (the twin).
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery, beat

from redlease.celery_beat import INSTANT_HEADER, scheduled_instant

URL = os.environ.get("REDLEASE_CELERY_URL", "redis://127.0.0.1:6379/0")
app = Celery("redlease_beat_tests", broker=URL, backend=URL)
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_hijack_root_logger = False
app.conf.beat_redlease_url = URL
app.conf.beat_redlease_lease = 2.0
app.conf.beat_schedule = {"fire": {"task": "tests.celery_beat.app.fire", "schedule": 1.0}}


@app.task(bind=True)
def fire(self: Any) -> None:
    """Count this run under its instant (hash ``fires``) and note when it was sent."""
    instant = getattr(self.request, INSTANT_HEADER, None)
    if instant is None:
        instant = (self.request.headers or {}).get(INSTANT_HEADER)
    client = redis.Redis.from_url(URL)
    client.hincrby("fires", f"{float(instant):.3f}", 1)
    client.rpush("seen", f"{time.time():.3f}")


class PlainInstants(beat.Scheduler):  # type: ignore[misc]
    """Beat's scheduler, its fires marked with their instant as redlease's are: no lock."""

    def apply_entry(self, entry: Any, producer: Any = None) -> None:
        instant = scheduled_instant(entry.schedule, time.time())
        entry.options = {**entry.options, "headers": {INSTANT_HEADER: instant}}
        super().apply_entry(entry, producer=producer)
