"""Leader election's pure part: the leader's record, its scripts and snapshot.

An election is a shared resource of capacity 1 (``_core/shared.py``): the leader is its one
holder, a lease on the server's clock renewed by the watchdog; candidates queue FIFO. Its term
is the fencing token of its grant, so terms strictly increase, also across expiries. The
leader's value is stored beside its lease (``payload``: ``"<term> <value>"``), and watchers
(``watchers``) are told whenever the leadership changes (``lua/election_watch.lua``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

from .holder import HolderInfo
from .scripts import load
from .shared import ELECTION, SharedKeys, Snapshot, as_bytes, int_list

__all__ = [
    "WATCH",
    "ElectionInfo",
    "Leader",
    "decode_watch",
    "election_info",
    "election_keys",
    "leader_of",
]

WATCH = load("election_watch", prelude=("common_lib", "shared_lib"))


def election_keys(prefix: str, name: bytes) -> SharedKeys:
    """The keys of the election ``name``: ``<prefix>:{<name>}:election:<key>``."""
    return SharedKeys.build(prefix, name, ELECTION)


class Leader(NamedTuple):
    """Who leads: the value it campaigned with, and its term (a fencing token)."""

    value: str
    term: int


@dataclass(frozen=True)
class ElectionInfo:
    """A snapshot of one election: the ``leader`` (``None``: nobody leads), the lease it has
    left (``remaining``, seconds), ``candidates`` queued, ``mine`` (this handle leads, the
    caller's term), ``last_term`` (the last term granted; the next is larger), and
    ``held_by`` (who leads: host, pid, thread or task, since when; ``None``: nobody)."""

    name: str | bytes
    leader: Leader | None
    remaining: float | None
    candidates: int
    mine: bool
    last_term: int
    held_by: HolderInfo | None = None


def _leader(payload: bytes) -> Leader:
    term, _, value = payload.partition(b" ")
    return Leader(value.decode(errors="replace"), int(term))


def leader_of(snapshot: Snapshot) -> Leader | None:
    """The leader in a snapshot of the election's resource."""
    if not snapshot.holders:
        return None
    return _leader(snapshot.holders[0].payload)


def election_info(snapshot: Snapshot, name: str | bytes) -> ElectionInfo:
    """The :class:`ElectionInfo` of a snapshot of the election's resource."""
    return ElectionInfo(
        name=name,
        leader=leader_of(snapshot),
        remaining=snapshot.holders[0].remaining if snapshot.holders else None,
        candidates=snapshot.waiters,
        mine=snapshot.mine is not None,
        last_term=snapshot.fence,
        held_by=snapshot.holders[0].info() if snapshot.holders else None,
    )


def decode_watch(raw: Any) -> tuple[bool, Leader | None, int]:
    """``election_watch.lua``'s reply: (changed, the leader to report, ms its lease has left
    when unchanged, else the latest term granted)."""
    try:
        if int(raw[0]) == 1 and len(raw) == 4:
            term, value = int(raw[1]), as_bytes(raw[2])
            leader = Leader(value.decode(errors="replace"), term) if term else None
            return True, leader, int(raw[3])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from election_watch.lua: {raw!r}") from exc
    status, ms = int_list(raw, "election_watch.lua", 2)
    if status != 0:
        raise ValueError(f"unexpected reply from election_watch.lua: {raw!r}")
    return False, None, ms
