"""Key layout: every key and channel of one lock shares the hash tag ``{name}``.

For prefix ``redlease`` and name ``orders:42``::

    redlease:{orders:42}:lock       STRING  the holder's token, PX = lease
    redlease:{orders:42}:fence      STRING  fencing counter, never expires, never reset
    redlease:{orders:42}:queue      ZSET    waiting tokens in FIFO order
    redlease:{orders:42}:handoff    STRING  reservation of the free lock for the queue head
    redlease:{orders:42}:released   channel where releases and hand-offs are announced

The shared tag puts them all in one Redis Cluster slot, so each script touches one slot.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["LockKeys"]


@dataclass(frozen=True)
class LockKeys:
    """The Redis keys and the channel of one lock name."""

    lock: bytes
    fence: bytes
    queue: bytes
    handoff: bytes
    channel: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> LockKeys:
        """Keys for ``name`` (already validated and encoded) under ``prefix``."""
        base = prefix.encode() + b":{" + name + b"}:"
        return cls(
            lock=base + b"lock",
            fence=base + b"fence",
            queue=base + b"queue",
            handoff=base + b"handoff",
            channel=base + b"released",
        )
