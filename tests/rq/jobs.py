"""The functions the RQ tests enqueue (a real ``rq worker`` imports them)."""

from __future__ import annotations

import time

import rq

from redlease.rq import current_fence


def record(tag: str, seconds: float = 0.0) -> str:
    """Record the run (``<tag> <fence>`` in the list ``runs``), then take ``seconds``."""
    job = rq.get_current_job()
    assert job is not None
    job.connection.rpush("runs", f"{tag} {current_fence()}")
    time.sleep(seconds)
    return tag
