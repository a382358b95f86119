"""Rate notation: ``"100/minute;5000/day"``, as the ``limits`` package writes limits.

One limit is ``AMOUNT/[MULTIPLE] UNIT`` or ``AMOUNT per [MULTIPLE] UNIT``: ``"10/second"``,
``"5 per minute"``, ``"10/2 minutes"``, ``"1000 per 30 days"``. The unit is ``second``,
``minute``, ``hour``, ``day``, ``month`` (30 days) or ``year`` (360 days; refused here, being
above the 30 days a key may live), with an optional plural ``s``, in any case. Limits are
separated by ``;``, ``,`` or ``|``. This is the grammar of ``limits.parse_many`` (limits
3.x/4.x ``util.py``), so a rate string written for slowapi or flask-limiter means the same here,
except that an amount or multiple of 0 and two limits over one window are refused.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from . import validate

__all__ = ["UNITS", "Rate", "parse", "rates"]

UNITS = {
    "second": 1,
    "minute": 60,
    "hour": 3600,
    "day": 86400,
    "month": 30 * 86400,
    "year": 360 * 86400,
}
"""Seconds per unit, as ``limits`` counts them (a month is 30 days, a year 12 months)."""

_ONE = re.compile(
    r"\s*([0-9]+)\s*(?:/|per)\s*([0-9]+)?\s*(second|minute|hour|day|month|year)s?\s*",
    re.IGNORECASE,
)
_SEPARATOR = re.compile(r"[,;|]")


@dataclass(frozen=True, order=True)
class Rate:
    """One limit: at most ``amount`` units per ``window`` seconds (per subject).

    ``str(rate)`` writes it back in the notation ``parse`` reads, e.g. ``"100/1 minute"``.
    """

    window: float
    amount: int

    def __str__(self) -> str:
        seconds = round(self.window)
        if seconds != self.window:  # a window given as limit=/window= in fractions of a second
            return f"{self.amount}/{self.window:g} seconds"
        for unit in ("day", "hour", "minute"):
            if seconds % UNITS[unit] == 0:
                return f"{self.amount}/{seconds // UNITS[unit]} {unit}"
        return f"{self.amount}/{seconds} second"


def parse(text: Any, arg: str = "rate") -> tuple[Rate, ...]:
    """The limits written in ``text``, sorted by window (shortest first).

    Raises ``TypeError`` unless ``text`` is a ``str``; ``ValueError`` (naming ``arg``) when it
    is not the notation, when an amount or multiple is 0, when a window is above 30 days or
    when two limits share a window.
    """
    if not isinstance(text, str):
        raise TypeError(
            f"{arg} must be a str such as '100/minute;5000/day', got {type(text).__name__}"
        )
    found: list[Rate] = []
    for part in _SEPARATOR.split(text):
        match = _ONE.fullmatch(part)
        if match is None:
            raise ValueError(
                f"{arg} must be limits such as '10/second', '5 per minute' or "
                f"'100/minute;5000/day', got {text!r}"
            )
        amount, multiple, unit = match.groups()
        times = 1 if multiple is None else int(multiple)
        if int(amount) == 0 or times == 0:
            raise ValueError(f"{arg} must not have an amount or window of 0, got {part.strip()!r}")
        window = times * UNITS[unit.lower()]
        if window > validate.MAX_TTL:
            raise ValueError(f"{arg} windows must be at most 30 days, got {part.strip()!r}")
        found.append(Rate(window=float(window), amount=validate.count(int(amount), arg)))
    return _distinct(sorted(found), arg)


def rates(rate: Any, limit: Any, window: Any) -> tuple[Rate, ...]:
    """The limiter's limits, from ``rate=`` or from ``limit=`` and ``window=`` (20 per 60 s
    when neither is given); giving ``rate`` with either of the others is a ``ValueError``."""
    if rate is not None:
        if limit is not None or window is not None:
            raise ValueError(
                "rate and limit/window are exclusive: give rate='100/minute' or "
                "limit=100, window=60.0, not both"
            )
        return parse(rate)
    amount = validate.count(20 if limit is None else limit, "limit")
    window_ms = validate.ttl_ms(60.0 if window is None else window, "window")
    return (Rate(window=window_ms / 1000, amount=amount),)


def _distinct(found: list[Rate], arg: str) -> tuple[Rate, ...]:
    for before, after in pairwise(found):
        if before.window == after.window:
            raise ValueError(
                f"{arg} has two limits over one window ({before} and {after}): keep one"
            )
    return tuple(found)
