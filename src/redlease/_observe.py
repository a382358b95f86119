"""The one place that reports what the locks do: to the log and to the installed observer.

The shared seams call these functions (never the primitives themselves): the lock handle
(``_async/handle.py``: acquire, release, extend, for every kind of lock) and the watchdog
(``_async/renewer.py``: renewals, lost leases). A new primitive built on those seams is
logged and measured with no code of its own.

The observer is the user's (:func:`redlease.metrics.use`); with none installed, each call is
one global read. An observer that raises is logged once per method and otherwise ignored:
metrics must never break a lock or stop the watchdog.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ._core.lease import Holding
from ._logging import record
from ._synchronization import ProcessLock

if TYPE_CHECKING:
    from .metrics import Observer

__all__ = [
    "acquired",
    "cache_lookup",
    "current",
    "error",
    "eviction_possible",
    "force_released",
    "held_at_close",
    "install",
    "lost",
    "not_acquired",
    "permits_mismatch",
    "rate_limit_shadowed",
    "rate_limit_unavailable",
    "released",
    "renewal_failed",
    "renewed",
    "waiting",
]

_observer: Observer | None = None
_failed: set[tuple[int, str]] = set()  # (id(observer), method) already logged as failing
_guard = ProcessLock()


def install(observer: Observer | None) -> Observer | None:
    """Install ``observer`` (``None``: none); returns the one it replaces."""
    global _observer
    with _guard:
        previous, _observer = _observer, observer
        _failed.clear()  # ids of observers no longer installed may be reused by new ones
    return previous


def current() -> Observer | None:
    """The installed observer, or ``None``."""
    return _observer


def _call(observer: Observer, method: str, *args: Any) -> None:
    try:
        getattr(observer, method)(*args)
    except Exception as exc:
        key = (id(observer), method)
        if key not in _failed:
            _failed.add(key)
            record(
                logging.ERROR,
                "observer_failed",
                "metrics observer %r failed in %s() (logged once): %s",
                observer,
                method,
                str(exc),  # (text: a kept record must not keep the error and its frames)
                exc_info=exc,
                method=method,
            )


def acquired(primitive: str, name: str, waited: float) -> None:
    """An acquire succeeded after ``waited`` seconds."""
    observer = _observer
    if observer is not None:
        _call(observer, "acquired", primitive, name, waited)


def not_acquired(primitive: str, name: str, waited: float) -> None:
    """An acquire returned ``False`` (held by another) after ``waited`` seconds."""
    observer = _observer
    if observer is not None:
        _call(observer, "not_acquired", primitive, name, waited)


def cache_lookup(name: str, outcome: str) -> None:
    """A call of a ``redlease.cached`` function ``name`` ended as ``outcome``."""
    observer = _observer
    if observer is not None:
        _call(observer, "cache_lookup", name, outcome)


def waiting(primitive: str, name: str, change: int) -> None:
    """An acquire started (``+1``) or ended (``-1``)."""
    observer = _observer
    if observer is not None:
        _call(observer, "waiting", primitive, name, change)


def released(holding: Holding, held: float) -> None:
    """``holding`` was released after being held ``held`` seconds."""
    observer = _observer
    if observer is not None:
        _call(observer, "released", holding.primitive, holding.name, held)


def error(primitive: str, name: str, operation: str, exc: BaseException) -> None:
    """``operation`` failed because Redis did (the caller gets ``exc``)."""
    observer = _observer
    if observer is not None:
        _call(observer, "error", primitive, name, operation, exc)


def rate_limit_unavailable(
    name: str, decision: str, exc: BaseException, level: int = logging.WARNING
) -> None:
    """A web rate limit could not reach Redis; the request was let through (``decision``
    ``"allow"``) or refused with 503 (``"deny"``). ``level``: DEBUG for a request that did
    not ask Redis (a back-off after a failure, which was logged at WARNING)."""
    record(
        level,
        "ratelimit_unavailable",
        "rate limiter %r could not reach Redis: request %s (on_unavailable=%r): %s: %s",
        name,
        "allowed" if decision == "allow" else "denied with 503",
        decision,
        type(exc).__name__,
        str(exc),
        primitive="ratelimit",
        name=name,
        decision=decision,
        error=f"{type(exc).__name__}: {exc}",
    )
    observer = _observer
    if observer is not None:
        _call(observer, "rate_limit_unavailable", name, decision)


def rate_limit_shadowed(
    name: str, subject: str, cost: int, retry_after: float, refused_by: str
) -> None:
    """A limiter in shadow mode let through a hit of ``cost`` for ``subject`` that limit
    ``refused_by`` (e.g. ``"10/1 second"``) refused; enforced, it would have waited
    ``retry_after`` seconds. INFO: shadow mode exists to show these."""
    record(
        logging.INFO,
        "ratelimit_shadow",
        "rate limiter %r (shadow mode) let through a hit for %r that %s would refuse "
        "(retry after %.3f s)",
        name,
        subject,
        refused_by,
        retry_after,
        primitive="ratelimit",
        name=name,
        subject=subject,
        cost=cost,
        limit=refused_by,
        retry_after=retry_after,
    )
    observer = _observer
    if observer is not None:
        _call(observer, "rate_limit_shadowed", name)


def renewed(holdings: Sequence[Holding]) -> None:
    """The watchdog renewed these holdings."""
    observer = _observer
    if observer is not None:
        for holding in holdings:
            _call(observer, "renewed", holding.primitive, holding.name)


def renewal_failed(holdings: Sequence[Holding], exc: BaseException, retry: float) -> None:
    """A renewal of ``holdings`` got no (usable) answer; it is tried again in ``retry`` s."""
    names = sorted({h.name for h in holdings})
    record(
        logging.WARNING,
        "renewal_failed",
        "renewal of %d lease(s) failed, retrying in %.2f s: %s: %s",
        len(holdings),
        retry,
        type(exc).__name__,
        str(exc),  # (not the error: a kept record would keep its frames, and the holdings)
        leases=len(holdings),
        names=names,
        primitive=holdings[0].primitive if holdings else "",
        name=names[0] if len(names) == 1 else "",
        retry=retry,
        error=f"{type(exc).__name__}: {exc}",
    )
    observer = _observer
    if observer is not None:
        for holding in holdings:
            _call(observer, "renewal_failed", holding.primitive, holding.name)


_REASONS = {
    "gone": "a renewal found it gone (its lease ran out, or it was taken)",
    "expired": "it ran out while renewals got no answer",
    "release": "release() found it gone (its lease ran out, or it was taken)",
    "extend": "extend() found it gone (its lease ran out, or it was taken)",
    "arrival": "it ran out before acquire() could return it: not returned as held",
}


def lost(holding: Holding, reason: str) -> None:
    """``holding`` is lost; ``reason`` is a key of ``_REASONS``."""
    record(
        logging.WARNING,
        "lease_lost",
        "%s %r lost its lease (fence %d): %s",
        holding.primitive or "lock",
        holding.name,
        holding.fence,
        _REASONS.get(reason, reason),
        primitive=holding.primitive,
        name=holding.name,
        fence=holding.fence,
        reason=reason,
    )
    observer = _observer
    if observer is not None:
        _call(observer, "lost", holding.primitive, holding.name)


def eviction_possible(server: str, policy: str, risk: str) -> None:
    """``server``'s ``maxmemory-policy`` is ``policy``, which may evict redlease's keys."""
    record(
        logging.WARNING,
        "eviction_possible",
        "Redis server %s has maxmemory-policy %s: %s. Locks need maxmemory-policy "
        "noeviction (docs/safety.md)",
        server,
        policy,
        risk,
        server=server,
        policy=policy,
    )


def held_at_close(holding: Holding, left: float) -> None:
    """``close()`` found ``holding`` still held: it is no longer renewed (``left`` s remain)."""
    record(
        logging.WARNING,
        "held_at_close",
        "%s %r (fence %d) was still held when redlease was closed for its client: it is no "
        "longer renewed and runs out in %.1f s unless its holder releases it first",
        holding.primitive or "lock",
        holding.name,
        holding.fence,
        max(left, 0.0),
        primitive=holding.primitive,
        name=holding.name,
        fence=holding.fence,
        remaining=max(left, 0.0),
    )


def permits_mismatch(name: str, permits: int, stored: int) -> None:
    """A Semaphore handle asked for ``permits``, but Redis stores ``stored``, which it uses.
    A WARNING: a silent mismatch would let more (or fewer) holders in than the caller meant."""
    record(
        logging.WARNING,
        "permits_mismatch",
        "semaphore %r: this handle asked for %d permits, but Redis stores %d, which it uses "
        "(set_permits() changes it for every handle)",
        name,
        permits,
        stored,
        name=name,
        permits=permits,
        stored=stored,
    )


def force_released(primitive: str, name: str, tokens: Sequence[str], fence: int) -> None:
    """An operator's break-glass release removed the holders ``tokens``; the fencing counter
    moved on to ``fence``. A WARNING: another process was holding it, and loses it now."""
    record(
        logging.WARNING,
        "force_released",
        "%s %r force-released: removed %d holder(s) %s; the fence moved on to %d",
        primitive,
        name,
        len(tokens),
        ", ".join(tokens),
        fence,
        primitive=primitive,
        name=name,
        holders=list(tokens),
        fence=fence,
    )
