"""Durations as people write them for schedules: ``90s``, ``15m``, ``24h``, ``7d``, ``1h30m``.

A plain number is seconds (``3600``, ``0.5``). Used by ``redlease run --every``, and by
:func:`seconds` for the arguments that also take a number or a ``timedelta`` (``Once``'s
``every`` and ``ttl``), so that the library and the command line read one notation.
"""

from __future__ import annotations

import datetime
import math
import re
from typing import Any

__all__ = ["UNITS", "parse_duration", "seconds"]

UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
"""Seconds per unit: milliseconds, seconds, minutes, hours, days, weeks."""

_PART = re.compile(r"(\d+(?:\.\d+)?|\.\d+)(ms|s|m|h|d|w)")


def parse_duration(text: str, arg: str = "duration") -> float:
    """Seconds in ``text``: a number (seconds), or number+unit parts (``1h30m``, ``90s``).

    Raises ``ValueError`` naming ``arg`` for anything else, and for a duration that is not
    finite and > 0.
    """
    if not isinstance(text, str):
        raise TypeError(f"{arg} must be str, got {type(text).__name__}")
    spaced = text.strip().lower()
    try:
        seconds = float(spaced)
    except ValueError:
        seconds = _with_units(spaced, text, arg)
    if math.isnan(seconds) or math.isinf(seconds) or seconds <= 0:
        raise ValueError(f"{arg} must be a duration > 0, got {text!r}")
    return seconds


def _with_units(spaced: str, text: str, arg: str) -> float:
    position, seconds, seen = 0, 0.0, set()
    for match in _PART.finditer(spaced):
        if match.start() != position or match.group(2) in seen:
            break
        seen.add(match.group(2))
        seconds += float(match.group(1)) * UNITS[match.group(2)]
        position = match.end()
    if not spaced or position != len(spaced):
        raise ValueError(
            f"{arg} must be seconds or a duration like 90s, 15m, 24h, 7d or 1h30m, got {text!r}"
        )
    return seconds


def seconds(value: Any, arg: str) -> float:
    """A duration argument in seconds: a number, a ``timedelta``, or text as
    :func:`parse_duration` reads it (``"24h"``, ``"1h30m"``, ``"90"``).

    Raises ``TypeError`` naming ``arg`` for anything else (``True`` included). Only text is
    checked here (> 0, as :func:`parse_duration` does): the range is the caller's.
    """
    if isinstance(value, str):
        return parse_duration(value, arg)
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(
            f"{arg} must be seconds, a timedelta or a duration like '24h', "
            f"got {type(value).__name__}"
        )
    try:
        return float(value)
    except OverflowError:  # an int beyond any float: longer than any range allows
        return math.inf
