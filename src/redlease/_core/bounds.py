"""How long a public call may take: the caller's timeout plus at most one socket timeout.

Every Redis reply is bounded by the client's socket timeout. A call that waits (``acquire``
with a timeout) may therefore end at its deadline plus one reply; and clean-up after a
failure (releasing an acquire whose reply was lost, leaving the waiters' queue) must fit in
what is left of that bound, or be handed to the background. A hung server then costs the
caller its timeout plus one socket timeout, never two or more.
"""

from __future__ import annotations

__all__ = ["MIN_WAIT", "TICK", "budget", "waited"]

TICK = 1.0
"""Longest single blocking read, in seconds: far below redis-py's default socket timeout (5 s),
whose expiry would make the client reconnect and retry."""
MIN_WAIT = 0.05
"""The least time a renewal is given to answer, even when the lease is nearly over."""


def budget(deadline: float | None, socket_timeout: float | None, now: float) -> float | None:
    """Seconds left, at ``now``, for clean-up within the bound of a call with ``deadline``.

    ``None``: no bound (the client has no socket timeout, so nothing is bounded anyway).
    A call without a deadline has spent its one socket timeout on the reply that failed:
    0.0, the clean-up goes to the background.
    """
    if socket_timeout is None:
        return None
    if deadline is None:
        return 0.0
    return max(deadline + socket_timeout - now, 0.0)


def waited(timeout: float | None) -> str:
    """How long a refused ``with`` waited, for its error: "for the whole timeout (5.0 s)",
    or "(tried once: timeout 0)"."""
    if timeout == 0:
        return "(tried once: timeout 0)"
    return f"for the whole timeout ({timeout} s)"
