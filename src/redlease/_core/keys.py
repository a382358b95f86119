"""Key layout: every key of one lock shares the hash tag ``{name}``; waiters' channels.

For prefix ``redlease`` and name ``orders:42``::

    redlease:{orders:42}:lock       STRING  the holder's token, PX = lease
    redlease:{orders:42}:fence      STRING  fencing counter, never expires, never reset
    redlease:{orders:42}:queue      ZSET    waiting tokens in FIFO order
    redlease:{orders:42}:handoff    STRING  reservation of the free lock for the queue head

The shared tag puts them all in one Redis Cluster slot, so each script touches one slot.
Waiters are not told on a channel per lock but on one channel per process,
``redlease:waiters:<process id>`` (see ``_core/waiters.py``), whatever the prefix.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["WAITERS", "LockKeys", "waiters_channel"]

WAITERS = b"redlease:waiters:"
"""The prefix of every process' waiters channel; the scripts append the process id."""


def waiters_channel(process: bytes) -> bytes:
    """The channel on which the lock scripts tell ``process`` about its waiters."""
    return WAITERS + process


@dataclass(frozen=True)
class LockKeys:
    """The Redis keys of one lock name."""

    lock: bytes
    fence: bytes
    queue: bytes
    handoff: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> LockKeys:
        """Keys for ``name`` (already validated and encoded) under ``prefix``."""
        base = prefix.encode() + b":{" + name + b"}:"
        return cls(
            lock=base + b"lock",
            fence=base + b"fence",
            queue=base + b"queue",
            handoff=base + b"handoff",
        )
