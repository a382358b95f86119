"""Loaded into redis-py's own test run (``-p``): its Lock tests build redlease's drop-in.

Copied next to the fetched suite at test time; ``REDLEASE_LOCK_KEYS`` chooses the drop-in's
keys ("" for redlease's, "redis-py" for the mixed-fleet mode)."""

from __future__ import annotations

import functools
import os
import sys
from typing import Any

import redlease.compat


def pytest_collection_modifyitems(items: list[Any]) -> None:
    keys = os.environ.get("REDLEASE_LOCK_KEYS", "")
    options = {"keys": keys} if keys else {}
    for name, module in list(sys.modules.items()):
        if not name.endswith("test_lock") or not hasattr(module, "Lock"):
            continue
        cls = redlease.compat.AsyncLock if "asyncio" in name else redlease.compat.Lock
        module.Lock = functools.partial(cls, **options) if options else cls
