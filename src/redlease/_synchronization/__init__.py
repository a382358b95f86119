"""The few concurrency primitives whose sync and asyncio forms differ, side by side.

Code in ``_async/`` uses the ``Async*`` names; ``scripts/unasync.py`` rewrites them to the plain
names for ``_sync/``. Each pair has the same methods, so the generated code is the same
algorithm with threads where the original has tasks. By what they hold: :mod:`.events`,
:mod:`.mutexes` (and ``ProcessLock``), :mod:`.background` (background work, ``on_lost``
callbacks), :mod:`.cleanup` (bounded clean-up, clean-up at the loop's shutdown).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import ParamSpec, TypeVar

from .background import AsyncBackground, AsyncCallbacks, Background, Callbacks
from .cleanup import MIN_BUDGET, AsyncAtShutdown, AsyncShield, AtShutdown, Shield
from .events import AsyncEvent, Event
from .mutexes import AsyncMutex, Mutex, ProcessLock

__all__ = [
    "MIN_BUDGET",
    "AsyncAtShutdown",
    "AsyncBackground",
    "AsyncCallbacks",
    "AsyncEvent",
    "AsyncFunction",
    "AsyncMutex",
    "AsyncShield",
    "AtShutdown",
    "Background",
    "Callbacks",
    "Event",
    "Function",
    "Mutex",
    "ProcessLock",
    "Shield",
]


_P = ParamSpec("_P")
_R = TypeVar("_R")
AsyncFunction = Callable[_P, Awaitable[_R]]
"""What an asyncio lock decorates: a coroutine function (``async def``)."""
Function = Callable[_P, _R]
"""What a sync lock decorates: a plain function."""
