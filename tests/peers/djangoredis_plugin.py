"""Loaded into django-redis's own test run (``-p``): its ``cache.lock()`` builds redlease's
drop-in, ``redlease.compat.django_lock``.

Copied next to the fetched suite at test time; ``REDLEASE_LOCK_KEYS`` chooses the drop-in's
keys ("" for redlease's, "redis-py" for the mixed-fleet mode)."""

from __future__ import annotations

import os
from typing import Any

import django_redis.cache

import redlease.compat


def pytest_configure(config: Any) -> None:
    keys = os.environ.get("REDLEASE_LOCK_KEYS", "")
    options = {"keys": keys} if keys else {}

    def lock(cache: Any, key: str, *args: Any, **kwargs: Any) -> redlease.compat.Lock:
        return redlease.compat.django_lock(key, *args, cache=cache, **kwargs, **options)

    django_redis.cache.RedisCache.lock = lock
