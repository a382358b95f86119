"""Each rate-limit algorithm written again in Python, to replay a run's decisions.

A model is fed the server time of each call (which the scripts return) and says what limit
``rate`` alone should answer: ``True`` (pass), ``False`` (refuse) or ``None`` when the call
falls within a rounding margin of the boundary (then either answer is right). Replaying a
real run through the models catches a script that refuses what it should let through, which
the upper bounds of ``test_ratelimit_bounds.py`` cannot see.
"""

from __future__ import annotations

import math

from redlease._core.ratelimit import RateLimit
from redlease._core.rates import Rate

__all__ = ["Model"]

EDGE_US = 2000  # fixed windows end by the key's expiry: ms resolution, on another clock read
EDGE_UNITS = 1e-6  # the scripts' floating-point slack, in units (and in us for GCRA)


class Model:
    """One limit of one subject under ``algorithm``, replayed from the server's times."""

    def __init__(self, algorithm: str, rate: Rate, size: int) -> None:
        self.algorithm, self.amount, self.size = algorithm, rate.amount, size
        self.window = round(rate.window * 1e6)  # us
        self.used, self.end = 0, -1  # fixed: units in the window, and when it ends
        self.tat = 0.0  # gcra
        self.tokens, self.at = float(size), -1  # token_bucket
        self.w, self.c, self.p = -1, 0, 0  # sliding

    def check(self, now: int, cost: int) -> bool | None:
        """Whether this limit alone passes a hit of ``cost`` at server time ``now`` (us)."""
        if self.algorithm == "fixed":
            if now >= self.end + EDGE_US:
                return cost <= self.amount
            if now >= self.end - EDGE_US:
                return None
            return self.used + cost <= self.amount
        if self.algorithm == "gcra":
            after = max(self.tat, now) + cost * self.window / self.amount
            return _margin(self.window - (after - now), 2.0)
        if self.algorithm == "token_bucket":
            return _margin(self._level(now) - cost, EDGE_UNITS)
        w, c, p = self._shifted(now)
        fraction = min(max((now - w * self.window) / self.window, 0.0), 1.0)
        return _margin(self.amount - (p * (1 - fraction) + c) - cost, EDGE_UNITS)

    def commit(self, now: int, cost: int, answer: RateLimit) -> None:
        """The hit passed every limit: count it (``answer`` is this limit's reply)."""
        if self.algorithm == "fixed":
            if self.amount - answer.remaining == cost:  # the counter was empty: a new window
                self.used, self.end = cost, now + self.window
            else:
                self.used += cost
        elif self.algorithm == "gcra":
            self.tat = max(self.tat, now) + cost * self.window / self.amount
        elif self.algorithm == "token_bucket":
            self.tokens, self.at = max(self._level(now) - cost, 0.0), now
        else:
            self.w, self.c, self.p = self._shifted(now)
            self.c += cost

    def _level(self, now: int) -> float:
        if self.at < 0:
            return float(self.size)
        refill = max(now - self.at, 0) * self.amount / self.window
        return min(float(self.size), self.tokens + refill)

    def _shifted(self, now: int) -> tuple[int, int, int]:
        w = math.floor(now / self.window)
        if self.w < w - 1:
            return w, 0, 0
        if self.w == w - 1:
            return w, 0, self.c
        return max(w, self.w), self.c, self.p


def _margin(margin: float, edge: float) -> bool | None:
    return None if abs(margin) <= edge else margin > 0
