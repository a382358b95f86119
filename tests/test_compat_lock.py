"""What only the sync ``redlease.compat.Lock`` has: redis-py's sync ``acquire(sleep, ...)``
positional order (the asyncio lock has no ``sleep``). The rest: tests/_async/test_compat_lock.py.
"""

from __future__ import annotations

import inspect
import re
import time
from pathlib import Path

import redis
import redis.asyncio.lock
import redis.lock

from redlease.compat import AsyncLock, Lock


def test_acquire_signatures_are_redis_pys() -> None:
    assert list(inspect.signature(Lock.acquire).parameters) == list(
        inspect.signature(redis.lock.Lock.acquire).parameters
    )
    assert list(inspect.signature(AsyncLock.acquire).parameters) == list(
        inspect.signature(redis.asyncio.lock.Lock.acquire).parameters
    )
    ours = list(inspect.signature(Lock.__init__).parameters)
    theirs = list(inspect.signature(redis.lock.Lock.__init__).parameters)
    assert ours[: len(theirs)] == theirs  # (redis-py < 5.3 has no raise_on_release_error)


def test_sync_acquire_takes_sleep_first(client: redis.Redis) -> None:
    holder = Lock(client, "positional")
    assert holder.acquire()
    other = Lock(client, "positional")
    started = time.monotonic()
    # acquire(sleep, blocking): blocking=False tries once, whatever sleep says
    assert other.acquire(0.01, False) is False
    assert time.monotonic() - started < 5.0
    holder.release()


def test_every_test_the_migration_page_names_exists() -> None:
    """docs/moving-from-redis-py.md names a test for each behaviour: each one must exist."""
    root = Path(__file__).resolve().parent
    page = (root.parent / "docs" / "moving-from-redis-py.md").read_text()
    named = set(re.findall(r"`(test_\w+)`", page))
    sources = "".join(
        (root / path).read_text()
        for path in (
            "_async/test_compat_lock.py",
            "_async/test_compat_fleet.py",
            "test_compat_lock.py",
            "test_compat_django.py",
        )
    )
    defined = set(re.findall(r"def (test_\w+)", sources))
    assert len(named) > 20
    assert named - defined == set()
