"""Whether a server answers: the state a backend keeps for its fan-outs and outage logs.

A server is *down* once a call failed at the connection level (refused, broken, timed out)
until a reply is read again, and *slow* while its last fan-out reply was late. Either makes
it :meth:`Health.hung`: new connections get no grace and a sync fan-out asks it last. A hung
server with no connection open is *probed* (a connection opened off the round's path)
:data:`PROBE` seconds after it stopped answering, then at doubling intervals up to
:data:`PROBE_MAX` while it does not answer.

Pure: no I/O, no clock reads; ``now`` is the caller's monotonic clock, in seconds.
"""

from __future__ import annotations

__all__ = ["PROBE", "PROBE_MAX", "Health"]

PROBE = 0.5
"""Seconds after a server was found down before a sync fan-out probes it (see
:meth:`Health.probe`); the pause doubles, up to :data:`PROBE_MAX`, while it keeps not
answering."""
PROBE_MAX = 30.0


class Health:
    """One server's health; each transition says whether an outage began or ended (to log)."""

    __slots__ = ("down", "probe_at", "probe_every", "slow")

    def __init__(self) -> None:
        self.down = False  # failed to answer, and has not answered since
        self.slow = False  # its last fan-out reply was late
        self.probe_at = 0.0  # when a sync fan-out next probes it
        self.probe_every = PROBE  # and then how long after that

    def hung(self) -> bool:
        """Whether the server did not answer when last asked (down), or late (slow)."""
        return self.down or self.slow

    def failed(self, now: float) -> bool:
        """A call failed at the connection level. True when the server was not down until
        now: an outage begins."""
        self._unanswered(now)
        if self.down:
            return False
        self.down = True
        return True

    def answered(self) -> bool:
        """A reply was read. True when the server was down: the outage ends."""
        if not self.down:
            return False
        self.down = False
        return True

    def on_time(self) -> None:
        """A fan-out read the server's reply within its deadline."""
        self.slow = False

    def late(self, now: float) -> None:
        """A fan-out gave up waiting for the server's reply."""
        self._unanswered(now)
        self.slow = True

    def probe(self, now: float) -> bool:
        """Whether to probe the server now; if so, the next probe is due twice as long after
        (at most :data:`PROBE_MAX`), as it is still not answering."""
        if now < self.probe_at:
            return False
        self.probe_every = min(2 * self.probe_every, PROBE_MAX)
        self.probe_at = now + self.probe_every
        return True

    def _unanswered(self, now: float) -> None:
        """No probe sooner than the interval from ``now`` (:data:`PROBE` afresh if the server
        was answering until now; a probe already due later stays)."""
        if not self.hung():
            self.probe_every = PROBE
        self.probe_at = max(self.probe_at, now + self.probe_every)
