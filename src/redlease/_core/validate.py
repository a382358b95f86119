"""Argument checks, done before anything is sent to Redis.

Each check raises ``TypeError`` (wrong kind) or ``ValueError`` (wrong value) with a message
that names the argument, and returns the value in the form the rest of the code uses.
"""

from __future__ import annotations

import math
from typing import Any

__all__ = [
    "MAX_COUNT",
    "MAX_TTL",
    "client_kind",
    "count",
    "name",
    "prefix",
    "timeout",
    "ttl_ms",
    "window_ms",
]

MAX_TTL = 30 * 24 * 3600.0
"""The longest lease accepted, in seconds (30 days): longer is almost surely a unit mistake."""
MAX_COUNT = 10**12
"""The largest count accepted (units, limits): Lua's numbers stay exact far beyond it."""


def _number(value: Any, arg: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a number of seconds, got {type(value).__name__}")
    number = float(value)
    if math.isnan(number):
        raise ValueError(f"{arg} must be a number of seconds, got NaN")
    return number


def ttl_ms(value: Any, arg: str = "ttl") -> int:
    """A lease in seconds (``0 < ttl <= 30 days``, finite), returned in whole milliseconds."""
    seconds = _number(value, arg)
    if seconds <= 0:
        raise ValueError(f"{arg} must be > 0 seconds, got {value!r}")
    if seconds > MAX_TTL:
        raise ValueError(f"{arg} must be at most 30 days ({MAX_TTL:.0f} s), got {value!r}")
    return max(1, round(seconds * 1000))


def window_ms(value: Any, arg: str = "handoff") -> int:
    """A hand-off window in seconds (``0 < value <= 60``), returned in whole milliseconds."""
    seconds = _number(value, arg)
    if not 0 < seconds <= 60:
        raise ValueError(f"{arg} must be > 0 and at most 60 seconds, got {value!r}")
    return max(1, round(seconds * 1000))


def timeout(value: Any, arg: str = "timeout") -> float | None:
    """A wait limit in seconds: ``None`` or ``-1`` wait forever, ``0`` tries once."""
    if value is None:
        return None
    seconds = _number(value, arg)
    if seconds == -1:
        return None
    if seconds < 0:
        raise ValueError(f"{arg} must be >= 0 seconds, or None / -1 to wait forever, got {value!r}")
    if math.isinf(seconds):
        return None
    return seconds


def name(value: Any, arg: str = "name") -> bytes:
    """A primitive's name: a non-empty ``str`` or ``bytes``, returned as bytes."""
    if isinstance(value, str):
        value = value.encode()
    elif not isinstance(value, (bytes, bytearray)):
        raise TypeError(f"{arg} must be str or bytes, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{arg} must not be empty")
    return bytes(value)


def prefix(value: Any, arg: str = "prefix") -> str:
    """A key prefix: a non-empty ``str`` with no white space and no braces."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{arg} must not be empty")
    if any(c.isspace() for c in value) or "{" in value or "}" in value:
        raise ValueError(f"{arg} must not contain white space or braces, got {value!r}")
    return value


def client_kind(client: Any, expected: type, arg: str = "client") -> None:
    """Refuse a client that is not an ``expected`` (a sync client for asyncio, or the reverse)."""
    if not isinstance(client, expected):
        raise TypeError(
            f"{arg} must be a {expected.__module__}.{expected.__qualname__}, got "
            f"{type(client).__module__}.{type(client).__qualname__} "
            "(redis.Redis clients go with redlease, redis.asyncio.Redis with redlease.asyncio)"
        )


def count(value: Any, arg: str, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """A whole count: an ``int`` (not ``bool``, not ``1.5`` or ``"1"``) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{arg} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{arg} must be >= {minimum}, got {value!r}")
    if value > maximum:
        raise ValueError(f"{arg} must be at most {maximum}, got {value!r}")
    return value
