"""What a fan-out round takes and gives back: its calls, and the results of replies not read.

A round's result per server is the reply, the exception raised in its place, or :class:`Late`
(a reply not read when the round returned: a vote not cast). :class:`Unsent` is a call never
sent at all. Both forms of the fan-out (``_fanout.py``, ``_fanout_sync.py``) share them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from redis.exceptions import TimeoutError

from ._core.kept import forget_frames
from ._core.scripts import Script

__all__ = ["LATE", "NOT_YET", "Call", "Enough", "Late", "Unsent", "caught", "late", "pack_all"]

Call = tuple[Any, Script, Sequence[bytes], Sequence[Any]]
"""One server's part: (backend, script, keys, args)."""

Enough = Callable[[list[Any]], bool]
"""Asked with the results so far (``None``: not read yet): may the fan-out return now?"""

LATE = 2.0
"""Seconds after sending that a late reply is still collected; then its connection is closed
(whatever was sent behind it still runs: the server has it)."""

NOT_YET: Any = object()
"""What ``arrived(late)`` returns for a late reply that has not come yet."""


class Late(TimeoutError):
    """A reply not read when the fan-out returned: its server was slower than the deadline,
    or than enough others. Counts as a vote not cast; the call may still run (or have run)
    on the server."""

    def __init__(
        self, message: str, backend: Any, pending: Any, task: Any = None, slot: Any = None
    ) -> None:
        super().__init__(message)
        self.backend = backend
        self.pending = pending
        self.task = task
        self.slot = slot  # asyncio: the call's slot (its Pending once sent)

    def forget(self) -> None:
        """Drop the references to the call (an error kept for a report keeps no connection
        alive); ``follow`` cannot be used afterwards."""
        self.backend = self.pending = self.task = self.slot = None


class Unsent(Late):
    """A call never sent: its server was ``hung`` and the call was not needed (sync: the
    others answered enough, or the deadline passed, before it would have been connected; a
    Redlock leaving the queues of such a server): a vote not cast, and nothing ran there
    (nothing to undo or follow)."""

    def __init__(self, backend: Any) -> None:
        super().__init__("not sent: known not to answer, and not needed in time", backend, None)


def late(backend: Any, pending: Any, started: float, task: Any = None, slot: Any = None) -> Late:
    """The :class:`Late` of a call sent in a round that began at ``started``."""
    waited = time.monotonic() - started
    return Late(f"no reply yet after {waited * 1000:.1f} ms", backend, pending, task, slot)


def pack_all(calls: Sequence[Call]) -> list[Any]:
    """Each call's command packed, once per distinct (script, keys, args)."""
    cache: dict[tuple[int, int, int], Any] = {}
    out = []
    for backend, script, keys, args in calls:
        key = (id(script), id(keys), id(args))
        packed = cache.get(key)
        if packed is None:
            packed = cache[key] = backend.pack(script, keys, args)
        out.append(packed)
    return out


def caught(exc: Exception) -> Exception:
    """A server's error, as its call's result (sync): without its traceback, whose frames
    reach the round's and its caller's (the handle, the watchdog's holdings), and which a
    frame keeping the results would hold in a cycle, for the collector to find some day."""
    forget_frames(exc)
    return exc
