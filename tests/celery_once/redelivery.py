"""The Celery app of the redelivery test: ``acks_late`` and a 1 s ``visibility_timeout``, so
the Redis broker delivers a message again while its first copy still runs.

``REDLEASE_REDELIVERY_URL`` names the server (broker, backend, locks). Each copy records
``deliver``/``start``/``end`` in the Redis list ``events``; ``REDLEASE_NON_EXCLUSIVE=1`` makes
the worker's adoption non-exclusive (the bug), for the broken twin.
"""

from __future__ import annotations

import hashlib
import os
import time
from typing import Any

import redis
from celery import Celery
from celery.signals import task_prerun

from redlease._core import handover
from redlease._core.scripts import Script
from redlease.celery import QueueOnce

URL = os.environ.get("REDLEASE_REDELIVERY_URL", "redis://127.0.0.1:6379/1")
app = Celery("redlease_redelivery", broker=URL, backend=URL)
app.conf.ONCE = {"settings": {"url": URL, "default_timeout": 60}}
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_hijack_root_logger = False
app.conf.broker_transport_options = {
    "visibility_timeout": 1,
    "unacked_restore_interval": 1,
    "unacked_restore_throttle": 1,
}

if os.environ.get("REDLEASE_NON_EXCLUSIVE") == "1":
    # The bug: an adopter of a token already adopted is let in too (any holder of the token).
    _check = "if holder == detached then"
    _source = handover.ADOPT.source.replace(
        _check,
        "local spent = redis.call('GET', adopted) or ''\n"
        "if holder == detached or (holder and spent == detached .. ' ' .. holder) then",
    )
    handover.ADOPT = Script("adopt", _source, hashlib.sha1(_source.encode()).hexdigest())


def event(what: str, task_id: str) -> None:
    redis.Redis.from_url(URL).rpush("events", f"{what} {task_id}")


@task_prerun.connect
def delivered(task_id: str | None = None, **_: Any) -> None:
    """Every copy the worker is handed, run or not."""
    event("deliver", task_id or "?")


@app.task(bind=True, base=QueueOnce, acks_late=True, once={"ttl": 2.0})
def long(self: Any, tag: str, seconds: float) -> str:
    """Record its start and end around ``seconds`` of work."""
    event("start", self.request.id)
    time.sleep(seconds)
    event("end", self.request.id)
    return tag
