"""The Celery app of the QueueOnce tests (``celery -A tests.celery_once.app worker``).

Broker, result backend and ``ONCE`` settings come from ``REDLEASE_CELERY_URL``. Each task
records what it saw in the Redis list ``runs`` (``<tag> <fence>``), so a test counts runs.
"""

from __future__ import annotations

import os
import time
from typing import Any

import redis
from celery import Celery

from redlease.celery import QueueOnce

URL = os.environ.get("REDLEASE_CELERY_URL", "redis://127.0.0.1:6379/0")
app = Celery("redlease_tests", broker=URL, backend=URL)
app.conf.ONCE = {"settings": {"url": URL, "default_timeout": 60}}
app.conf.broker_connection_retry_on_startup = True
app.conf.worker_hijack_root_logger = False


def record(tag: str, fence: Any) -> None:
    redis.Redis.from_url(URL).rpush("runs", f"{tag} {fence}")


@app.task(bind=True)
def ping(self: Any) -> str:
    """A worker is up."""
    return "pong"


@app.task(bind=True, base=QueueOnce, once={"graceful": False})
def slow(self: Any, tag: str, seconds: float = 1) -> str:
    """Record the run, then take ``seconds``."""
    record(tag, self.request.redlease_fence)
    time.sleep(seconds)
    return tag


@app.task(bind=True, base=QueueOnce)
def failing(self: Any, tag: str) -> None:
    """Record the run, then fail."""
    record(tag, self.request.redlease_fence)
    raise RuntimeError("failing on purpose")


@app.task(bind=True, base=QueueOnce, once={"keys": ["tag"], "ttl": 1.0, "timeout": 3600})
def hold(self: Any, tag: str, seconds: float) -> None:
    """Record the run, then take ``seconds`` on a short running lease (1 s)."""
    record(tag, self.request.redlease_fence)
    time.sleep(seconds)


@app.task(bind=True, base=QueueOnce, once={"unlock_before_run": True})
def early(self: Any, tag: str, seconds: float) -> None:
    """Frees its key when it starts."""
    record(tag, self.request.redlease_fence)
    time.sleep(seconds)


@app.task(bind=True, base=QueueOnce, once={"keys": ["tga"]})
def typo(self: Any, tag: str) -> None:
    """Its keys name no argument."""


@app.task(bind=True, base=QueueOnce)
def fence_of(self: Any) -> Any:
    """The fence the task sees (``None`` without a lock)."""
    return self.request.redlease_fence


@app.task(bind=True, base=QueueOnce, once={"keys": ["tag"], "keep_on_retry": True})
def retried(self: Any, tag: str) -> None:
    """Record the run; the first attempt retries after 2 s, keeping its key."""
    record(tag, self.request.redlease_fence)
    if not self.request.retries:
        raise self.retry(countdown=2, max_retries=1)


@app.task(bind=True, base=QueueOnce, once={"keys": ["tag"]})
def retried_free(self: Any, tag: str) -> None:
    """The same without ``keep_on_retry``: its key is free during the countdown."""
    record(tag, self.request.redlease_fence)
    if not self.request.retries:
        raise self.retry(countdown=2, max_retries=1)


@app.task(bind=True, base=QueueOnce, once={"return_existing": True})
def shared(self: Any, tag: str, seconds: float) -> str:
    """A duplicate gets this copy's result (celery-singleton's answer)."""
    record(tag, self.request.redlease_fence)
    time.sleep(seconds)
    return f"{tag} by {self.request.id}"
