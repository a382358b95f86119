"""The seeded fault schedule: pure, so a seed always plans the same faults in the same order.

Faults run in three lanes at once, each lane one fault at a time:

==========  =====================================================================
process     ``pause``: SIGSTOP a holder for longer than its lease, then SIGCONT;
            ``kill``: SIGKILL a holder (a new worker takes its place)
server      ``stop``: the server crashes (SIGKILL) and comes back with its data later;
            ``restart-empty``: it restarts with no data; ``hang``: SIGSTOP, SIGCONT
network     through the proxy: ``latency`` (every chunk delayed), ``stall`` (nothing
            moves, then everything is delivered), ``drop`` (every connection closed)
==========  =====================================================================

Each lane plays its kinds in rounds, every round a seeded shuffle of them, so after ``n``
rounds each kind has been planned ``n`` times.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["CLUSTER_KINDS", "KINDS", "LANES", "Planned", "plan"]

LANES: dict[str, tuple[str, ...]] = {
    "process": ("pause", "kill"),
    "server": ("stop", "restart-empty", "hang"),
    "network": ("latency", "stall", "drop"),
}
KINDS: tuple[str, ...] = tuple(k for kinds in LANES.values() for k in kinds)
CLUSTER_KINDS: tuple[str, ...] = ("pause", "kill", "stop", "hang")
"""The kinds the cluster target injects: no proxies (network lane) and no empty restart (a
node restarted without its ``nodes.conf`` would leave the cluster)."""


@dataclass(frozen=True)
class Planned:
    """One planned fault: ``length`` seconds it lasts (0: instant), ``amount`` its strength
    (latency in seconds), ``pick`` in [0, 1) chooses the server or holder it hits."""

    kind: str
    length: float
    amount: float
    pick: float


def _length(kind: str, rng: random.Random, ttl: float) -> tuple[float, float]:
    if kind == "pause":  # past the lease: that is what makes it a fault for a lease lock
        return ttl + rng.uniform(0.3, 0.6), 0.0
    if kind in ("stop", "hang", "stall"):
        return rng.uniform(0.2, 0.5), 0.0
    if kind == "latency":
        return rng.uniform(0.3, 0.6), rng.uniform(0.02, 0.1)
    return 0.0, 0.0  # kill, restart-empty, drop: instant


def plan(seed: int, lane: str, ttl: float) -> Iterator[Planned]:
    """The endless fault sequence of ``lane`` for ``seed`` (leases of ``ttl`` seconds)."""
    rng = random.Random(f"{seed}:{lane}")
    kinds = list(LANES[lane])
    while True:
        rng.shuffle(kinds)
        for kind in kinds:
            length, amount = _length(kind, rng, ttl)
            yield Planned(kind, length, amount, rng.random())
