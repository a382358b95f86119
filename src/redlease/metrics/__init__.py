"""Metrics for redlease's locks: off by default, one observer installed by you.

::

    import prometheus_client, redlease.metrics
    redlease.metrics.use(redlease.metrics.PrometheusMetrics(prometheus_client.REGISTRY))

Every lock (``Lock``, ``RLock``, ``Redlock``, sync and asyncio) reports to the installed
:class:`Observer` what it does: how long each acquire waited, how long each lock was held,
how many acquires are in progress, renewals, lost leases and Redis failures, each by
primitive (``"lock"``, ``"rlock"``, ``"redlock"``) and lock name. Two observers come with
redlease, each needing an optional extra:

* :class:`PrometheusMetrics` (``pip install 'redlease[prometheus]'``);
* :class:`OpenTelemetryMetrics` (``pip install 'redlease[otel]'``).

Both bound the label cardinality: the first ``max_names`` distinct lock names (default 100)
are labelled by name, every later one as ``"other"``. Write your own by subclassing
:class:`Observer`. The observer is process-wide: it sees every client's locks, in every
thread and event loop, so its methods must be thread-safe and quick (they run on the lock's
path and in the watchdog). An observer that raises is logged once per method and ignored.
"""

from __future__ import annotations

from .. import _observe
from ._names import OTHER
from ._observer import Observer
from ._otel import OpenTelemetryMetrics
from ._prometheus import PrometheusMetrics

__all__ = ["OTHER", "Observer", "OpenTelemetryMetrics", "PrometheusMetrics", "current", "use"]


def use(observer: Observer | None) -> Observer | None:
    """Install ``observer`` for the whole process (``None``: stop observing).

    Returns the observer it replaces (``None`` if there was none), so that a test can put it
    back. Raises ``TypeError`` unless ``observer`` is an :class:`Observer` or ``None``.
    """
    if observer is not None and not isinstance(observer, Observer):
        raise TypeError(
            f"observer must be a redlease.metrics.Observer or None, got {type(observer).__name__}"
        )
    return _observe.install(observer)


def current() -> Observer | None:
    """The installed observer, or ``None`` (metrics are off)."""
    return _observe.current()
