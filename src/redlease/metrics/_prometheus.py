"""Prometheus metrics (the ``prometheus`` extra: ``prometheus-client``)."""

from __future__ import annotations

from typing import Any

from ._names import Names
from ._observer import Observer

__all__ = ["BUCKETS", "PrometheusMetrics"]

BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800)
"""Histogram buckets in seconds: from an uncontended acquire to a long-held lock."""


class PrometheusMetrics(Observer):
    """An :class:`Observer` that records into a ``prometheus_client`` registry.

    ``use(PrometheusMetrics(registry))`` registers, with labels ``primitive`` and ``name``:

    ==================================  =========  ==========================================
    metric                              type       extra label
    ==================================  =========  ==========================================
    ``redlease_acquire_wait_seconds``   histogram  ``outcome``: ``acquired``, ``not_acquired``
    ``redlease_hold_seconds``           histogram
    ``redlease_waiters``                gauge      (acquires in progress)
    ``redlease_renewals_total``         counter    ``outcome``: ``renewed``, ``failed``
    ``redlease_leases_lost_total``      counter
    ``redlease_errors_total``           counter    ``operation``: ``acquire``, ``release``,
                                                   ``extend``
    ``redlease_ratelimit_unavailable``  counter    ``decision``: ``allow``, ``deny`` (label
    ``_total``                                     ``name`` only: the limiter's)
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
            ``prometheus_client.REGISTRY``). One ``PrometheusMetrics`` per registry: a second
            would register the same names again, which prometheus-client refuses.
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
        self._names = Names(max_names)
        registry = prometheus_client.REGISTRY if registry is None else registry
        labels = ("primitive", "name")
        common: dict[str, Any] = {"namespace": namespace, "registry": registry}
        self.wait = prometheus_client.Histogram(
            "acquire_wait_seconds",
            "Seconds an acquire() waited, by outcome",
            (*labels, "outcome"),
            buckets=buckets,
            **common,
        )
        self.hold = prometheus_client.Histogram(
            "hold_seconds", "Seconds a lock was held (acquire to release)", labels,
            buckets=buckets, **common,
        )  # fmt: skip
        self.waiters = prometheus_client.Gauge(
            "waiters", "acquire() calls in progress (mostly waiting)", labels, **common
        )
        self.renewals = prometheus_client.Counter(
            "renewals", "Lease renewals by the watchdog, by outcome", (*labels, "outcome"),
            **common,
        )  # fmt: skip
        self.lost_leases = prometheus_client.Counter(
            "leases_lost", "Leases lost while held", labels, **common
        )
        self.errors = prometheus_client.Counter(
            "errors", "Operations that failed because Redis did", (*labels, "operation"),
            **common,
        )  # fmt: skip

        self.unavailable = prometheus_client.Counter(
            "ratelimit_unavailable", "Web rate-limit checks that could not reach Redis, by "
            "the decision applied", ("name", "decision"), **common,
        )  # fmt: skip

    def acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.labels(primitive, self._names(name), "acquired").observe(waited)

    def not_acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.labels(primitive, self._names(name), "not_acquired").observe(waited)

    def waiting(self, primitive: str, name: str, change: int) -> None:
        self.waiters.labels(primitive, self._names(name)).inc(change)

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
