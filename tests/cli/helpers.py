"""Helpers shared by the command-line tests (test_run.py, test_inspect.py, test_main.py,
test_demo.py)."""

from __future__ import annotations

import sys
import time
from typing import Any

from redlease._core.lock import LockKeys
from redlease.cli import main
from tests.topology import RedisServer

PY = sys.executable
REFUSED_URL = "redis://127.0.0.1:1"  # nothing listens on port 1


def keys(name: str, prefix: str = "redlease") -> LockKeys:
    return LockKeys.build(prefix, name.encode())


def cli(server: RedisServer, *args: str) -> int:
    """``redlease --url <server> ARGS...`` in-process."""
    return main(["--url", server.url, *args])


def wait_for(predicate: Any, limit: float = 10.0) -> bool:
    """Poll ``predicate`` (bounded) until true; returns its last value."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


def py(code: str) -> list[str]:
    """A command running Python ``code``."""
    return [PY, "-c", code]
