"""Argument checks, done before anything is sent to Redis.

Each check raises ``TypeError`` (wrong kind) or ``ValueError`` (wrong value) with a message
that names the argument, and returns the value in the form the rest of the code uses.
"""

from __future__ import annotations

import inspect
import math
import threading
from typing import Any, NamedTuple

__all__ = [
    "CLIENT_APIS",
    "MAX_COUNT",
    "MAX_TTL",
    "MIN_LEASE",
    "LeaseOptions",
    "count",
    "lease_ms",
    "lease_options",
    "name",
    "on_lost",
    "prefix",
    "timeout",
    "ttl_ms",
    "wait_limit",
    "window_ms",
]

MAX_TTL = 30 * 24 * 3600.0
"""The longest lease accepted, in seconds (30 days): longer is almost surely a unit mistake."""
MIN_LEASE = 0.05
"""The shortest lease accepted, in seconds (50 ms). A holder must be able to renew before its
lease ends: the watchdog renews every third of the lease, and each renewal is a round trip
that also waits for a thread (or task) to be scheduled, which takes milliseconds on a loaded
machine. A shorter lease is lost before it can be renewed, and Redis only expires keys to
the millisecond."""
MAX_COUNT = 10**12
"""The largest count accepted (units, limits): Lua's numbers stay exact far beyond it."""
CLIENT_APIS = "sync clients go with redlease, asyncio clients with redlease.asyncio"
"""Which API takes which client, for refusing a client of the other kind. It lives here, outside
the code scripts/unasync.py rewrites, so that the sync API's message names redlease.asyncio too."""


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


def lease_ms(value: Any, arg: str = "ttl") -> int:
    """A lease in seconds (``MIN_LEASE <= ttl <= 30 days``), returned in whole milliseconds."""
    ms = ttl_ms(value, arg)
    if ms < MIN_LEASE * 1000:
        raise ValueError(
            f"{arg} must be at least {MIN_LEASE} seconds (a shorter lease runs out before it "
            f"can be renewed), got {value!r}"
        )
    return ms


def on_lost(value: Any, *, coroutines: bool) -> Any:
    """An ``on_lost`` callback: ``None``, or callable with no arguments.

    ``coroutines``: whether a coroutine function is accepted (the asyncio API awaits it on the
    lock's event loop; the sync API has no loop to run it on).
    """
    if value is None:
        return None
    if not callable(value):
        raise TypeError(f"on_lost must be callable or None, got {type(value).__name__}")
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return value
    try:
        signature.bind()
    except TypeError:
        raise TypeError(
            f"on_lost must be callable with no arguments, got {value!r} with signature {signature}"
        ) from None
    if not coroutines and inspect.iscoroutinefunction(value):
        raise TypeError(
            "on_lost must not be a coroutine function with the sync API (nothing would await "
            "it): use a plain function, or redlease.asyncio"
        )
    return value


def window_ms(value: Any, arg: str = "handoff") -> int:
    """A hand-off window in seconds (``0 < value <= 60``), returned in whole milliseconds."""
    seconds = _number(value, arg)
    if not 0 < seconds <= 60:
        raise ValueError(f"{arg} must be > 0 and at most 60 seconds, got {value!r}")
    return max(1, round(seconds * 1000))


def timeout(value: Any, arg: str = "timeout") -> float | None:
    """A wait limit in seconds: ``None`` or ``-1`` wait forever, ``0`` tries once.

    One longer than ``threading.TIMEOUT_MAX`` (about 292 years; 49 days on Windows) waits
    forever too: no thread, socket or clock can wait that long (they raise OverflowError).
    """
    if value is None:
        return None
    seconds = _number(value, arg)
    if seconds == -1:
        return None
    if seconds < 0:
        raise ValueError(f"{arg} must be >= 0 seconds, or None / -1 to wait forever, got {value!r}")
    if math.isinf(seconds) or seconds > threading.TIMEOUT_MAX:
        return None
    return seconds


def name(value: Any, arg: str = "name") -> bytes:
    """A primitive's name: a non-empty ``str`` or ``bytes``, returned as bytes."""
    if isinstance(value, str):
        value = _utf8(value, arg)
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
    _utf8(value, arg)
    return value


def _utf8(value: str, arg: str) -> bytes:
    try:
        return value.encode()
    except UnicodeEncodeError:
        raise ValueError(f"{arg} must be valid UTF-8 text, got {value!r}") from None


def count(value: Any, arg: str, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """A whole count: an ``int`` (not ``bool``, not ``1.5`` or ``"1"``) in [minimum, maximum]."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{arg} must be an int, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{arg} must be >= {minimum}, got {value!r}")
    if value > maximum:
        raise ValueError(f"{arg} must be at most {maximum}, got {value!r}")
    return value


def replicas(value: Any, arg: str = "wait_replicas") -> int:
    """A number of replicas to wait for: an ``int`` from 0 (do not wait) to 100."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{arg} must be an int, got {type(value).__name__}")
    if not 0 <= value <= 100:
        raise ValueError(f"{arg} must be >= 0 and at most 100, got {value!r}")
    return value


def decorated(func: object, lock: str, *, coroutine: bool) -> None:
    """Refuse what a lock cannot decorate: not a function, or the other kind of function (a
    coroutine function for a sync lock, a plain one for an asyncio lock)."""
    if not callable(func):
        raise TypeError(f"a lock decorates a function, got {type(func).__name__}")
    if inspect.iscoroutinefunction(func) is coroutine:
        return
    if coroutine:
        raise TypeError(
            f"redlease.asyncio.{lock} decorates coroutine functions (async def); "
            f"{func!r} is not one: use redlease.{lock}"
        )
    raise TypeError(
        f"redlease.{lock} decorates plain functions; {func!r} is a coroutine function: "
        f"use redlease.asyncio.{lock}"
    )


class LeaseOptions(NamedTuple):
    """The checked options of a leased handle (a lock, a semaphore, ...)."""

    ttl_ms: int
    timeout: float | None
    renew: bool
    on_lost: Any
    window_ms: int


def lease_options(
    ttl: Any, wait: Any, renew: Any, lost: Any, handoff: Any, *, coroutines: bool
) -> LeaseOptions:
    """Check the ``ttl``, ``timeout``, ``renew``, ``on_lost`` and ``handoff`` of a handle."""
    if not isinstance(renew, bool):
        raise TypeError(f"renew must be a bool, got {type(renew).__name__}")
    checked_lost = on_lost(lost, coroutines=coroutines)
    return LeaseOptions(lease_ms(ttl), timeout(wait), renew, checked_lost, window_ms(handoff))


def wait_limit(blocking: bool, value: Any, default: float | None, *, given: bool) -> float | None:
    """How long an acquire may wait: ``value`` when ``given``, else ``default``; ``0`` when not
    ``blocking`` (where a timeout other than ``None`` / ``-1`` is a ValueError)."""
    if not blocking:
        if given and timeout(value) is not None:
            raise ValueError("timeout must not be given when blocking is False")
        return 0.0
    return timeout(value) if given else default
