"""One server's health as its backends share it: the pure state machine
(:class:`~redlease._core.health.Health`) with the clock read, and the outage log: a WARNING,
``server_unavailable``, when the server stops answering, and an INFO, ``server_available``,
when it answers again (once each per outage).
"""

from __future__ import annotations

import logging
import time

from .._core.health import Health
from .._logging import record

__all__ = ["ServerHealth"]


class ServerHealth(Health):
    """:class:`~redlease._core.health.Health` of the server at ``address`` (for logs), whose
    outages are logged."""

    __slots__ = ("address",)

    def __init__(self, address: str) -> None:
        super().__init__()
        self.address = address

    def outage(self, exc: BaseException) -> None:
        """A call failed at the connection level with ``exc``: log it if an outage begins."""
        if self.failed(time.monotonic()):
            record(
                logging.WARNING,
                "server_unavailable",
                "Redis server %s is unavailable: %s: %s",
                self.address,
                type(exc).__name__,
                str(exc),  # (not the error: a kept record would keep its frames alive)
                server=self.address,
                error=f"{type(exc).__name__}: {exc}",
            )

    def recovered(self) -> None:
        """A reply was read: log it if the server had stopped answering."""
        if self.answered():
            record(
                logging.INFO,
                "server_available",
                "Redis server %s answers again",
                self.address,
                server=self.address,
            )
