"""redis-py's Lock API on redlease (``redlease.compat``): its errors and argument checks.

The errors are redlease's *and* redis-py's, so both kinds of ``except`` clause keep working:

==========================  =============================================  =========================
raised when                 redlease.compat class (also a redlease ...)    also a redis-py ...
==========================  =============================================  =========================
``with`` did not acquire    :class:`NotAcquiredError` (``NotAcquired``)    ``LockError``
release/extend, not held    :class:`NotHeldError` (``LockNotOwned``)       ``LockError``
the lease ran out / taken   :class:`LockNotOwnedError` (``LockLost``)      ``LockNotOwnedError``
extend a ``timeout=None``   :class:`LockError` (``LockError``)             ``LockError``
Redis failed                :class:`UnavailableError` (``LockUnavailable``)  ``ConnectionError``
==========================  =============================================  =========================

An outage is not a redis-py ``LockError`` (redis-py raises ``ConnectionError`` there too), so
``except redis.exceptions.LockError`` never swallows one.
"""

from __future__ import annotations

from typing import Any

import redis.exceptions

from .. import errors
from . import validate
from .scripts import load

__all__ = [
    "ACQUIRE",
    "INSPECT",
    "KEYS",
    "RELEASE",
    "LockError",
    "LockNotOwnedError",
    "NotAcquiredError",
    "NotHeldError",
    "UnavailableError",
    "blocking_timeout",
    "decode_acquire",
    "decode_inspect",
    "keys",
    "lease",
    "lock_timeout",
    "seconds",
    "sleep",
    "token",
    "translate",
]


class LockError(errors.LockError, redis.exceptions.LockError):
    """A lock error of ``redlease.compat``: both :class:`redlease.LockError` and redis-py's
    ``redis.exceptions.LockError`` (``lock_name`` and ``name`` are the lock's name)."""

    def __init__(self, message: str, *, name: str | bytes | None = None) -> None:
        super().__init__(message, name=name)
        # redis-py >= 5.3 sets these in its own __init__; 5.0 has none: set them here.
        self.message = message
        self.lock_name: Any = name


class NotAcquiredError(LockError, errors.NotAcquired):
    """``with lock:`` waited ``blocking_timeout`` (or tried once) and did not get the lock."""


class NotHeldError(LockError, errors.LockNotOwned):
    """release / extend / reacquire of a lock this handle (for this thread or task) does not
    hold. redis-py raises a plain ``LockError`` here, and so does this, in its MRO."""


class LockNotOwnedError(LockError, errors.LockLost, redis.exceptions.LockNotOwnedError):
    """The lock was held, but its lease ran out (or it was taken) before release / extend."""


class UnavailableError(errors.LockUnavailable, redis.exceptions.ConnectionError):
    """Redis failed: :class:`redlease.LockUnavailable` and redis-py's ``ConnectionError``
    (not a ``LockError``), the Redis error chained as the cause of its cause."""

    def __init__(self, message: str, *, name: str | bytes | None = None) -> None:
        super().__init__(message, name=name)
        self.lock_name = name


def translate(exc: errors.LockError, name: str | bytes) -> errors.LockError:
    """The ``redlease.compat`` error for a redlease error ``exc`` (raise it ``from exc``)."""
    message = str(exc)
    if isinstance(exc, errors.LockLost):
        return LockNotOwnedError(message, name=name)
    if isinstance(exc, errors.LockNotOwned):
        return NotHeldError(message, name=name)
    if isinstance(exc, errors.LockUnavailable):
        return UnavailableError(message, name=name)
    return exc


# -- keys="redis-py": the lock in redis-py's own key (one key, its name; value: the token) ----
KEYS = ("redlease", "redis-py")
"""Where a ``redlease.compat`` lock lives: redlease's keys (the default: fair, fenced by a
counter) or redis-py's one key, so that redis-py's ``Lock`` and this one exclude each other."""
ACQUIRE = load("redispy_acquire", prelude=("common_lib",))
RELEASE = load("redispy_release")
INSPECT = load("redispy_inspect")


def keys(value: Any) -> str:
    """``keys``: ``"redlease"`` or ``"redis-py"``."""
    if not isinstance(value, str):
        raise TypeError(f"keys must be 'redlease' or 'redis-py', got {type(value).__name__}")
    if value not in KEYS:
        raise ValueError(f"keys must be 'redlease' or 'redis-py', got {value!r}")
    return value


def decode_acquire(raw: Any) -> tuple[bool, int]:
    """redispy_acquire.lua's reply: (acquired, the fence if so, else the holder's ms left)."""
    return bool(int(raw[0])), int(raw[1])


def decode_inspect(raw: Any) -> tuple[bool, bool, int]:
    """redispy_inspect.lua's reply: (held, held with our token, ms left: -1 none, -2 free)."""
    return bool(int(raw[0])), bool(int(raw[1])), int(raw[2])


# -- argument checks (named as redis-py names them) -----------------------------------------
def lock_timeout(value: Any) -> int | None:
    """``timeout``: ``None`` (a renewed lease) or the lock's life in seconds -> ms."""
    if value is None:
        return None
    return validate.lease_ms(value, "timeout")


def seconds(value: Any, arg: str) -> float:
    """A number of seconds (int or float, not bool)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be a number of seconds, got {type(value).__name__}")
    return float(value)


def lease(value: float, arg: str) -> float:
    """A lease to set, in seconds, checked as redlease checks one (at least 0.05 s)."""
    return validate.lease_ms(value, arg) / 1000


def blocking_timeout(value: Any) -> float | None:
    """``blocking_timeout``: ``None`` waits forever; a negative wait tries once, as in
    redis-py (whose wait ends before its first sleep)."""
    if value is None:
        return None
    return max(0.0, seconds(value, "blocking_timeout"))


def sleep(value: Any) -> None:
    """``sleep``: accepted for redis-py's signature and not used (waiters are woken by
    pub/sub); still checked, so that a typo does not pass silently."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"sleep must be a number of seconds, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"sleep must be 0 or more, got {value!r}")


def token(value: Any) -> None:
    """``token=``: refused. A redlease lease token is random per acquisition: a chosen one
    could be shared by two holders, each able to release the other's lock."""
    if value is not None:
        raise ValueError(
            "token= is not supported by redlease.compat locks: each acquisition gets a random "
            "token of its own (a chosen token shared by two holders lets each release the "
            "other's lock); pass token=None"
        )
