"""The count-down latch's pure part: its keys, scripts and snapshot.

Three keys per name, in one Redis Cluster slot::

    <prefix>:{<name>}:count       STRING  the count left; absent: not counting
    <prefix>:{<name>}:generation  STRING  rounds completed: INCR'd when the count reaches 0
    <prefix>:{<name>}:waiters     ZSET    waiting tokens (told "H<token> 0" when it opens)

``count_down`` to 0 deletes the count, bumps the generation and tells every waiter at once,
in the same script: each waiter is released exactly once per round. A waiter passes the
generation it first saw, so a latch opened and counting again before it looked (a lost
message) still releases it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import ForeignData
from . import keys
from .scripts import load
from .shared import int_list

__all__ = [
    "COUNT_DOWN",
    "INSPECT",
    "LEAVE",
    "SET",
    "WAIT",
    "LatchInfo",
    "LatchKeys",
    "decode_inspect",
    "decode_wait",
]

SET = load("latch_set")
COUNT_DOWN = load("latch_count_down", prelude=("common_lib",))
WAIT = load("latch_wait", prelude=("common_lib",))
LEAVE = load("latch_leave")
INSPECT = load("latch_inspect")


@dataclass(frozen=True)
class LatchKeys:
    """The Redis keys of one latch."""

    count: bytes
    generation: bytes
    waiters: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> LatchKeys:
        """Keys for ``name`` (already validated and encoded) under ``prefix``."""
        return cls(*keys.tagged(prefix, name, "count", "generation", "waiters"))

    def in_order(self) -> list[bytes]:
        """All three keys, in the order the latch scripts take them."""
        return [self.count, self.generation, self.waiters]


def decode_wait(raw: Any) -> tuple[bool, int]:
    """``latch_wait.lua``'s reply: (open, generation)."""
    status, generation = int_list(raw, "latch_wait.lua", 2)
    if status not in (0, 1):
        raise ValueError(f"unexpected reply from latch_wait.lua: {raw!r}")
    return bool(status), generation


@dataclass(frozen=True)
class LatchInfo:
    """A snapshot of one latch: ``count`` left (0: not counting), ``rounds`` completed (times
    the count reached 0), ``waiters`` blocked in ``wait()``."""

    name: str | bytes
    count: int
    rounds: int
    waiters: int


def decode_inspect(raw: Any, name: str | bytes, latch: LatchKeys) -> LatchInfo:
    """Decode ``latch_inspect.lua``; :class:`~redlease.ForeignData` for a foreign key."""
    values = int_list(raw, "latch_inspect.lua")
    if len(values) == 2 and values[0] == -3:
        key = latch.in_order()[values[1] - 1]
        raise ForeignData(
            f"key {key.decode(errors='replace')} of latch {name!r} holds data redlease did "
            "not write",
            name=name,
            key=key,
        )
    if len(values) != 3:
        raise ValueError(f"unexpected reply from latch_inspect.lua: {raw!r}")
    return LatchInfo(name, *values)
