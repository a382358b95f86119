"""The watchdog's schedule: which holdings to renew, when, and in which batch.

A holding is renewed every third of its lease. Renewals due within ``coalesce`` of the earliest
one are sent together (at most ``batch`` holdings a tick), one round trip per renewal target
and script (:func:`batches`; large batches as several pipelined calls of :data:`CHUNK`), so one
renewer serves ten thousand leases of every kind with a few round trips per tick. A renewal
that failed is retried after its own delay, never sooner: coalescing pulls regular renewals
forward, not retries (else a dead server would be retried in a busy loop, each try of a
Cluster's a refresh of its map of slots). Holdings are referenced weakly: a lock whose handle
was dropped without ``release()`` is no longer renewed, and expires within its lease.

Every renewal script has one contract: ``KEYS[i]`` is the i-th holding's key, ``ARGV[2i-1]``
its token and ``ARGV[2i]`` its new lease in ms; it answers 1 (renewed) or 0 (lost) per
holding (:func:`batch_call`, :func:`decode`).
"""

from __future__ import annotations

import weakref
from collections.abc import Hashable, Iterator, Sequence
from typing import Any

from .lease import Holding
from .scripts import Script

__all__ = ["CHUNK", "CLOSE", "RenewSchedule", "batch_call", "batches", "by_end", "chunks", "decode"]

CHUNK = 1000
"""Most holdings renewed by one script call; a larger batch is several calls, pipelined."""
CLOSE = 0.25
"""Seconds: a holding whose lease ends sooner is renewed in a call of its own (see by_end)."""


def batches(due: Sequence[Holding]) -> list[tuple[Hashable, Script, list[Holding]]]:
    """Split ``due`` into one batch per (renewal target, script), in order of first appearance."""
    groups: dict[tuple[Hashable, str], tuple[Hashable, Script, list[Holding]]] = {}
    for holding in due:
        script = holding.renew_script
        if script is None:
            raise ValueError(f"holding of {holding.key!r} has no renewal script")
        group = groups.setdefault(
            (holding.renew_target, script.sha), (holding.renew_target, script, [])
        )
        group[2].append(holding)
    return list(groups.values())


def by_end(batch: list[Holding], now: float) -> list[list[Holding]]:
    """``batch`` split in two: the holdings whose lease ends within :data:`CLOSE` of ``now``,
    then the others (empty groups left out), to be renewed in that order.

    A batch's call waits for its reply no longer than its earliest lease end: one holding
    about to run out (late, after a pause or failed renewals) would otherwise cut the wait of
    every other holding of its batch to almost nothing, and fail them all on a loaded
    machine, round after round, until their own leases ran out. The close ones go first:
    their call ends within CLOSE whatever happens, so a hung server does not delay their
    ``on_lost`` behind the others' longer wait."""
    sooner = [h for h in batch if h.renew_by() - now < CLOSE]
    later = [h for h in batch if h.renew_by() - now >= CLOSE]
    return [group for group in (sooner, later) if group]


def chunks(due: Sequence[Holding], size: int | None = None) -> list[Sequence[Holding]]:
    """``due`` in slices of at most ``size`` (default :data:`CHUNK`) holdings, a call each."""
    step = CHUNK if size is None else size
    return [due[i : i + step] for i in range(0, len(due), step)]


def batch_call(due: Sequence[Holding]) -> tuple[list[bytes], list[Any]]:
    """KEYS and ARGV of a renewal script for ``due``: each key, then (token, lease ms) each."""
    args: list[Any] = []
    for holding in due:
        args += [holding.token, holding.ttl_ms]
    return [holding.key for holding in due], args


def decode(reply: Any, n: int) -> list[bool]:
    """A renewal script's reply: True (renewed) / False (lost) for each of ``n`` holdings."""
    if not isinstance(reply, list) or len(reply) != n:
        raise ValueError(f"unexpected reply from a renewal script: {reply!r}")
    return [bool(int(r)) for r in reply]


class RenewSchedule:
    """Due times of the holdings to renew. Not thread-safe: the shell guards it."""

    def __init__(self, *, batch: int = 100_000, coalesce: float = 0.5) -> None:
        self.batch = batch
        self.coalesce = coalesce
        # id -> (the holding, weakly; when it is due; True for a retry: not before then)
        self._due: dict[int, tuple[weakref.ref[Holding], float, bool]] = {}

    def __len__(self) -> int:
        return len(self._due)

    def add(self, holding: Holding, now: float, *, delay: float | None = None) -> None:
        """Renew ``holding`` a third of its lease from ``now``, or, for a retry after a failed
        renewal, ``delay`` seconds from ``now`` and not sooner (see :meth:`take_due`)."""
        if delay is None:
            self._due[id(holding)] = (weakref.ref(holding), now + holding.ttl_ms / 3000, False)
        else:
            self._due[id(holding)] = (weakref.ref(holding), now + delay, True)

    def discard(self, holding: Holding) -> None:
        """Stop renewing ``holding``: called by release *before* the release is sent."""
        self._due.pop(id(holding), None)

    def drain(self) -> list[Holding]:
        """Stop renewing everything; returns the holdings still held (active)."""
        held = [holding for holding, _, _ in self._live()]
        self._due.clear()
        return held

    def _live(self) -> Iterator[tuple[Holding, float, bool]]:
        for key, (ref, due, retry) in list(self._due.items()):
            holding = ref()
            if holding is None or not holding.active:
                del self._due[key]
            else:
                yield holding, due, retry

    def next_due(self) -> float | None:
        """When the next renewal is due, or ``None`` when nothing is left to renew."""
        return min((due for _, due, _ in self._live()), default=None)

    def take_due(self, now: float) -> list[Holding]:
        """The holdings to renew now (earliest first, at most ``batch``): those due by now, and
        the regular renewals due within ``coalesce`` of a renewal period (retries: by now)."""
        live = list(self._live())
        horizon = now + self.coalesce * min((h.ttl_ms / 3000 for h, _, _ in live), default=0.0)
        due = sorted(
            ((d, h) for h, d, retry in live if d <= (now if retry else horizon)),
            key=lambda x: x[0],
        )
        return [h for _, h in due[: self.batch]]

    def expired(self, now: float) -> list[Holding]:
        """Holdings whose lease has surely run out (renewals kept failing)."""
        return [h for h, _, _ in self._live() if h.expires_at <= now]
