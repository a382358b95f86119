"""The watchdog's schedule: which holdings to renew, when, and in which batch.

A holding is renewed every third of its lease. Renewals due within ``coalesce`` of the earliest
one are sent together in one renew.lua call (at most ``batch`` keys), so one renewer serves
thousands of locks with a few round trips per tick. Holdings are referenced weakly: a lock whose
handle was dropped without ``release()`` is no longer renewed, and expires within its lease.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

from .lease import Holding

__all__ = ["RenewSchedule"]


class RenewSchedule:
    """Due times of the holdings to renew. Not thread-safe: the shell guards it."""

    def __init__(self, *, batch: int = 100, coalesce: float = 0.25) -> None:
        self.batch = batch
        self.coalesce = coalesce
        self._due: dict[int, tuple[weakref.ref[Holding], float]] = {}

    def __len__(self) -> int:
        return len(self._due)

    def add(self, holding: Holding, now: float, *, delay: float | None = None) -> None:
        """Renew ``holding`` after ``delay`` seconds (default: a third of its lease)."""
        if delay is None:
            delay = holding.ttl_ms / 3000
        self._due[id(holding)] = (weakref.ref(holding), now + delay)

    def discard(self, holding: Holding) -> None:
        """Stop renewing ``holding``: called by release *before* the release is sent."""
        self._due.pop(id(holding), None)

    def _live(self) -> Iterator[tuple[Holding, float]]:
        for key, (ref, due) in list(self._due.items()):
            holding = ref()
            if holding is None or not holding.active:
                del self._due[key]
            else:
                yield holding, due

    def next_due(self) -> float | None:
        """When the next renewal is due, or ``None`` when nothing is left to renew."""
        return min((due for _, due in self._live()), default=None)

    def take_due(self, now: float) -> list[Holding]:
        """The holdings to renew now (earliest first, at most ``batch``)."""
        horizon = now + self.coalesce * min((h.ttl_ms / 3000 for h, _ in self._live()), default=0.0)
        due = sorted(((d, h) for h, d in self._live() if d <= horizon), key=lambda x: x[0])
        return [h for _, h in due[: self.batch]]

    def expired(self, now: float) -> list[Holding]:
        """Holdings whose lease has surely run out (renewals kept failing)."""
        return [h for h, _ in self._live() if h.expires_at <= now]
