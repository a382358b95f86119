"""A small circuit breaker: after Redis failed, stop asking it for a back-off.

A web helper that fails open (or closed) must not pay a socket timeout on every request while
Redis hangs: worker threads would queue behind it. After a failure the breaker is *open* for
``backoff`` seconds (callers skip Redis and take their outage answer at once); then one call
is let through as a trial, and the next trial comes only a back-off later unless that one
succeeds, so a hung server costs one timeout per back-off, not one per request.

Pure: no I/O, no clock reads, no locks; ``now`` is the caller's monotonic clock in seconds.
Two threads racing a trial may both be let through: harmless (one more timeout at most).
"""

from __future__ import annotations

import math
from typing import Any

__all__ = ["BACKOFF", "Breaker", "backoff"]

BACKOFF = 2.0
"""Seconds without Redis after a failure, by default."""
MAX_BACKOFF = 3600.0


def backoff(value: Any, arg: str = "backoff") -> float:
    """A back-off in seconds: ``0 <= value <= 3600``; ``0`` turns the breaker off."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a number of seconds, got {type(value).__name__}")
    seconds = float(value)
    if math.isnan(seconds) or not 0 <= seconds <= MAX_BACKOFF:
        raise ValueError(f"{arg} must be >= 0 and at most {MAX_BACKOFF:.0f} seconds, got {value!r}")
    return seconds


class Breaker:
    """Closed (every call goes to Redis) until :meth:`failed`; then open until ``now`` passes
    the back-off, when :meth:`allows` lets one trial through."""

    __slots__ = ("backoff", "until")

    def __init__(self, seconds: float = BACKOFF) -> None:
        self.backoff = backoff(seconds)
        self.until: float | None = None  # None: closed; else no call before this instant

    def allows(self, now: float) -> bool:
        """Whether a call may go to Redis now (a trial if the breaker was open)."""
        if self.until is None:
            return True
        if now < self.until:
            return False
        # This caller is the trial: the others wait another back-off unless it succeeds.
        self.until = now + self.backoff
        return True

    def succeeded(self) -> None:
        """Redis answered: close the breaker."""
        self.until = None

    def failed(self, now: float) -> None:
        """Redis failed: open the breaker for a back-off (nothing if the back-off is 0)."""
        if self.backoff > 0:
            self.until = now + self.backoff

    def remaining(self, now: float) -> float:
        """Seconds until the next call may go to Redis (0 when closed or due)."""
        return 0.0 if self.until is None else max(self.until - now, 0.0)
