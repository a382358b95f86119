"""Prometheus metrics (the ``prometheus`` extra: ``prometheus-client``)."""

from __future__ import annotations

import weakref
from typing import Any

from .._synchronization import ProcessLock
from ._names import Names
from ._observer import Observer

__all__ = ["BUCKETS", "PrometheusMetrics"]

BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
"""Histogram buckets in seconds: from an uncontended acquire to a long-held lock."""

_REGISTERED: weakref.WeakKeyDictionary[Any, dict[str, tuple[Any, PrometheusMetrics]]] = (
    weakref.WeakKeyDictionary()
)
"""Per registry and namespace: the settings and the first PrometheusMetrics registered there."""
_GUARD = ProcessLock()


class PrometheusMetrics(Observer):
    """An :class:`Observer` that records into a ``prometheus_client`` registry.

    ``use(PrometheusMetrics(registry))`` registers, with labels ``primitive`` and ``name``:

    ==================================  =========  ==========================================
    metric                              type       extra label
    ==================================  =========  ==========================================
    ``redlease_acquire_wait_seconds``   histogram  ``outcome``: ``acquired``, ``not_acquired``
    ``redlease_hold_seconds``           histogram
    ``redlease_waiters``                gauge      (acquires in progress)
    ``redlease_cache_lookups_total``    counter    ``outcome`` (label ``name`` only): ``hit``,
                                                   ``stale``, ``miss``, ``wait``, ``fallback``
    ``redlease_renewals_total``         counter    ``outcome``: ``renewed``, ``failed``
    ``redlease_leases_lost_total``      counter
    ``redlease_errors_total``           counter    ``operation``: ``acquire``, ``release``,
                                                   ``extend``
    ``redlease_ratelimit_unavailable``  counter    ``decision``: ``allow``, ``deny`` (label
    ``_total``                                     ``name`` only: the limiter's)
    ``redlease_ratelimit_shadowed``     counter    (label ``name`` only): hits a limiter in
    ``_total``                                     shadow mode let through
    ==================================  =========  ==========================================
    """

    def __init__(
        self,
        registry: Any = None,
        *,
        max_names: int = 100,
        namespace: str = "redlease",
        buckets: tuple[float, ...] = BUCKETS,
    ) -> None:
        """Create the metrics and register them.

        :param registry: a ``prometheus_client.CollectorRegistry`` (default: the global
            ``prometheus_client.REGISTRY``). A second ``PrometheusMetrics`` on the same
            registry and namespace records into the first one's metrics (``use()`` may run
            twice: a reload, a test); with other ``buckets`` or ``max_names`` it raises
            ``ValueError``.
        :param max_names: how many distinct lock names get a label of their own; later
            ones are labelled ``"other"``.
        :param namespace: the metric names' prefix.
        :param buckets: the histograms' bucket bounds, in seconds.
        """
        try:
            import prometheus_client
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "PrometheusMetrics needs prometheus-client: pip install 'redlease[prometheus]'"
            ) from exc
        names = Names(max_names)
        registry = prometheus_client.REGISTRY if registry is None else registry
        settings = (tuple(buckets), names.limit)
        with _GUARD:
            sets = _REGISTERED.setdefault(registry, {})
            known = sets.get(namespace)
            if known is not None:  # use() again (a reload, a second app): the same metrics
                if known[0] != settings:
                    raise ValueError(
                        f"registry already has redlease's metrics under namespace "
                        f"{namespace!r} with other buckets or max_names: pass the same ones, "
                        "or another namespace"
                    )
                self.__dict__.update(known[1].__dict__)
                return
            self._names = names
            self._register(prometheus_client, registry, namespace, tuple(buckets))
            sets[namespace] = (settings, self)

    def _register(self, client: Any, registry: Any, namespace: str, buckets: Any) -> None:
        """Create the metrics in ``registry``; a clear ValueError if a name is taken."""
        labels = ("primitive", "name")
        common: dict[str, Any] = {"namespace": namespace, "registry": registry}
        made: list[Any] = []
        try:
            self.wait = client.Histogram(
                "acquire_wait_seconds",
                "Seconds an acquire() waited, by outcome",
                (*labels, "outcome"),
                buckets=buckets,
                **common,
            )
            made.append(self.wait)
            self.hold = client.Histogram(
                "hold_seconds", "Seconds a lock was held (acquire to release)", labels,
                buckets=buckets, **common,
            )  # fmt: skip
            made.append(self.hold)
            self.waiters = client.Gauge(
                "waiters", "acquire() calls in progress (mostly waiting)", labels, **common
            )
            made.append(self.waiters)
            self.cache_lookups = client.Counter(
                "cache_lookups", "Calls of redlease.cached functions, by outcome",
                ("name", "outcome"), **common,
            )  # fmt: skip
            made.append(self.cache_lookups)
            self.renewals = client.Counter(
                "renewals", "Lease renewals by the watchdog, by outcome", (*labels, "outcome"),
                **common,
            )  # fmt: skip
            made.append(self.renewals)
            self.lost_leases = client.Counter(
                "leases_lost", "Leases lost while held", labels, **common
            )
            made.append(self.lost_leases)
            self.errors = client.Counter(
                "errors", "Operations that failed because Redis did", (*labels, "operation"),
                **common,
            )  # fmt: skip
            made.append(self.errors)
            self.unavailable = client.Counter(
                "ratelimit_unavailable", "Web rate-limit checks that could not reach Redis, by "
                "the decision applied", ("name", "decision"), **common,
            )  # fmt: skip
            made.append(self.unavailable)
            self.shadowed = client.Counter(
                "ratelimit_shadowed", "Hits a rate limiter in shadow mode let through that its "
                "limits refused", ("name",), **common,
            )  # fmt: skip
            made.append(self.shadowed)
        except ValueError as exc:  # prometheus-client's "Duplicated timeseries"
            for metric in made:
                registry.unregister(metric)
            raise ValueError(
                f"registry already has metrics named like redlease's ({namespace}_...), not "
                f"registered by a PrometheusMetrics: pass another namespace ({exc})"
            ) from exc

    def acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.labels(primitive, self._names(name), "acquired").observe(waited)

    def not_acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.labels(primitive, self._names(name), "not_acquired").observe(waited)

    def waiting(self, primitive: str, name: str, change: int) -> None:
        self.waiters.labels(primitive, self._names(name)).inc(change)

    def cache_lookup(self, name: str, outcome: str) -> None:
        self.cache_lookups.labels(self._names(name), outcome).inc()

    def released(self, primitive: str, name: str, held: float) -> None:
        self.hold.labels(primitive, self._names(name)).observe(held)

    def renewed(self, primitive: str, name: str) -> None:
        self.renewals.labels(primitive, self._names(name), "renewed").inc()

    def renewal_failed(self, primitive: str, name: str) -> None:
        self.renewals.labels(primitive, self._names(name), "failed").inc()

    def lost(self, primitive: str, name: str) -> None:
        self.lost_leases.labels(primitive, self._names(name)).inc()

    def error(self, primitive: str, name: str, operation: str, error: BaseException) -> None:
        self.errors.labels(primitive, self._names(name), operation).inc()

    def rate_limit_unavailable(self, name: str, decision: str) -> None:
        self.unavailable.labels(self._names(name), decision).inc()

    def rate_limit_shadowed(self, name: str) -> None:
        self.shadowed.labels(self._names(name)).inc()
