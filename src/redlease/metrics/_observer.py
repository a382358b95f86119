"""The observer interface: what a lock tells the installed metrics."""

from __future__ import annotations

__all__ = ["Observer"]


class Observer:
    """Told what redlease's locks do. Every method does nothing here: override what you use.

    ``primitive`` is the kind of lock (``"lock"``, ``"rlock"``, ``"redlock"``; more as
    primitives are added) and ``name`` the lock's name, exactly as given (bound the
    cardinality yourself, e.g. with a mapping like :class:`PrometheusMetrics` does).
    Methods are called from the thread (task) that uses the lock, or from the watchdog; they
    must be thread-safe, quick, and never block on I/O.
    """

    def acquired(self, primitive: str, name: str, waited: float) -> None:
        """An ``acquire()`` got the lock after ``waited`` seconds."""

    def not_acquired(self, primitive: str, name: str, waited: float) -> None:
        """An ``acquire()`` returned ``False`` after ``waited`` seconds: it stayed held by
        another (for the whole timeout, or at the one try of ``blocking=False``)."""

    def waiting(self, primitive: str, name: str, change: int) -> None:
        """An ``acquire()`` started (``change`` = +1) or ended (-1), whatever its outcome.

        The sum is the number of acquires in progress: mostly callers waiting for the lock.
        """

    def cache_lookup(self, name: str, outcome: str) -> None:
        """A call of the ``redlease.cached`` function ``name`` (its qualified name, or its
        ``key=`` str) ended as ``outcome``: ``"hit"`` (a fresh value), ``"stale"`` (an expired
        value, served while one caller refreshes it), ``"miss"`` (this call computed it),
        ``"wait"`` (it waited for another's computation), ``"fallback"`` (that took longer than
        ``lock_ttl``: this call computed it too, without storing it)."""

    def released(self, primitive: str, name: str, held: float) -> None:
        """A ``release()`` gave the lock back after holding it ``held`` seconds."""

    def renewed(self, primitive: str, name: str) -> None:
        """The watchdog renewed one lease."""

    def renewal_failed(self, primitive: str, name: str) -> None:
        """A renewal of one lease got no answer; it is retried until the lease is surely over."""

    def lost(self, primitive: str, name: str) -> None:
        """A lease was lost while held: found gone by the watchdog, ``extend()`` or
        ``release()``, or run out while renewals failed."""

    def error(self, primitive: str, name: str, operation: str, error: BaseException) -> None:
        """``operation`` (``"acquire"``, ``"release"``, ``"extend"``) raised ``error``
        because Redis failed (a :class:`~redlease.Unavailable`)."""

    def rate_limit_unavailable(self, name: str, decision: str) -> None:
        """A web rate limit (``redlease.web``, ``redlease.django``) could not reach Redis and
        ``decision`` (``"allow"`` or ``"deny"``, its ``on_unavailable``) was applied."""

    def rate_limit_shadowed(self, name: str) -> None:
        """A rate limiter in ``mode="shadow"`` let through a hit its limits refused (it
        would have been refused, or would have waited, in ``mode="enforce"``)."""
