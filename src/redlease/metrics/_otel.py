"""OpenTelemetry metrics (the ``otel`` extra: ``opentelemetry-api``)."""

from __future__ import annotations

from typing import Any

from ._names import Names
from ._observer import Observer
from ._prometheus import BUCKETS

__all__ = ["OpenTelemetryMetrics"]


class OpenTelemetryMetrics(Observer):
    """An :class:`Observer` that records with OpenTelemetry instruments.

    The meter is ``"redlease"`` from ``meter_provider`` (default: the global one, set by your
    OpenTelemetry SDK set-up). Attributes ``primitive`` and ``name`` on every point:

    ==============================  ===============  ========================================
    instrument                      kind             extra attribute
    ==============================  ===============  ========================================
    ``redlease.acquire.wait``       histogram (s)    ``outcome``: ``acquired``,
                                                     ``not_acquired``
    ``redlease.hold``               histogram (s)
    ``redlease.waiters``            up-down counter  (acquires in progress)
    ``redlease.cache.lookups``      counter          ``outcome`` (attribute ``name`` only)
    ``redlease.renewals``           counter          ``outcome``: ``renewed``, ``failed``
    ``redlease.leases_lost``        counter
    ``redlease.errors``             counter          ``operation``
    ``redlease.ratelimit``          counter          ``decision``: ``allow``, ``deny``
    ``.unavailable``                                 (attribute ``name`` only)
    ``redlease.ratelimit``          counter          (attribute ``name`` only): hits let
    ``.shadowed``                                    through by shadow mode
    ==============================  ===============  ========================================
    """

    def __init__(self, meter_provider: Any = None, *, max_names: int = 100) -> None:
        """Create the instruments.

        :param meter_provider: an OpenTelemetry ``MeterProvider`` (default: the global one).
        :param max_names: how many distinct lock names get an attribute value of their own;
            later ones are recorded as ``"other"``.
        """
        try:
            from opentelemetry import metrics
        except ImportError as exc:  # pragma: no cover - depends on the installed extras
            raise ImportError(
                "OpenTelemetryMetrics needs opentelemetry-api: pip install 'redlease[otel]'"
            ) from exc
        from .. import __version__

        self._names = Names(max_names)
        provider = metrics.get_meter_provider() if meter_provider is None else meter_provider
        meter = provider.get_meter("redlease", __version__)
        self.wait = _histogram(meter, "redlease.acquire.wait", "Seconds an acquire() waited")
        self.hold = _histogram(meter, "redlease.hold", "Seconds a lock was held")
        self.waiters = meter.create_up_down_counter(
            "redlease.waiters", unit="{acquire}", description="acquire() calls in progress"
        )
        self.cache_lookups = meter.create_counter(
            "redlease.cache.lookups", unit="{call}", description="Calls of cached functions"
        )
        self.renewals = meter.create_counter(
            "redlease.renewals", unit="{renewal}", description="Lease renewals by the watchdog"
        )
        self.lost_leases = meter.create_counter(
            "redlease.leases_lost", unit="{lease}", description="Leases lost while held"
        )
        self.errors = meter.create_counter(
            "redlease.errors", unit="{error}", description="Operations that failed: Redis did"
        )

        self.unavailable = meter.create_counter(
            "redlease.ratelimit.unavailable",
            unit="{request}",
            description="Web rate-limit checks that could not reach Redis, by decision",
        )
        self.shadowed = meter.create_counter(
            "redlease.ratelimit.shadowed",
            unit="{hit}",
            description="Hits a rate limiter in shadow mode let through that it refused",
        )

    def _attributes(self, primitive: str, name: str, **more: str) -> dict[str, str]:
        return {"primitive": primitive, "name": self._names(name), **more}

    def acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.record(waited, self._attributes(primitive, name, outcome="acquired"))

    def not_acquired(self, primitive: str, name: str, waited: float) -> None:
        self.wait.record(waited, self._attributes(primitive, name, outcome="not_acquired"))

    def waiting(self, primitive: str, name: str, change: int) -> None:
        self.waiters.add(change, self._attributes(primitive, name))

    def cache_lookup(self, name: str, outcome: str) -> None:
        self.cache_lookups.add(1, {"name": self._names(name), "outcome": outcome})

    def released(self, primitive: str, name: str, held: float) -> None:
        self.hold.record(held, self._attributes(primitive, name))

    def renewed(self, primitive: str, name: str) -> None:
        self.renewals.add(1, self._attributes(primitive, name, outcome="renewed"))

    def renewal_failed(self, primitive: str, name: str) -> None:
        self.renewals.add(1, self._attributes(primitive, name, outcome="failed"))

    def lost(self, primitive: str, name: str) -> None:
        self.lost_leases.add(1, self._attributes(primitive, name))

    def error(self, primitive: str, name: str, operation: str, error: BaseException) -> None:
        self.errors.add(1, self._attributes(primitive, name, operation=operation))

    def rate_limit_unavailable(self, name: str, decision: str) -> None:
        self.unavailable.add(1, {"name": self._names(name), "decision": decision})

    def rate_limit_shadowed(self, name: str) -> None:
        self.shadowed.add(1, {"name": self._names(name)})


def _histogram(meter: Any, name: str, description: str) -> Any:
    """A histogram in seconds, with buckets for seconds where the API can advise them."""
    try:
        return meter.create_histogram(
            name,
            unit="s",
            description=description,
            explicit_bucket_boundaries_advisory=list(BUCKETS),
        )
    except TypeError:  # pragma: no cover - opentelemetry-api < 1.23 has no advisory
        return meter.create_histogram(name, unit="s", description=description)
