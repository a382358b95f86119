"""Fencing at the resource: key layout, argument checks and reply decoding of FencedStore.

A fencing token only helps if the *resource* checks it. :class:`~redlease.FencedStore` is such
a resource for data kept in Redis: a hash of fields whose every change runs one Lua
compare-and-set (``lua/fenced_write.lua``) that accepts the change only if its fence is at
least the highest fence the resource has accepted, and records the new high-water mark in the
same step.

**Equal fences are accepted.** One holder must be able to write twice under one acquisition
(``lock.fence`` does not change while the lock is held), and two holders never get the same
fence from a lock (the script that grants the lock raises the counter: ``next_fence`` in
``lua/common_lib.lua``, max(counter + 1, server time in us)). A fence can repeat only when the
lock's fencing counter was lost *and* the lock server's clock went back (see
``docs/safety.md``); rejecting equal fences would not help then anyway, since the repeated
fences are not necessarily equal to the last one accepted. Fences are below
:data:`MAX_FENCE` until about the year 2255.

Keys, for prefix ``redlease`` and resource ``invoice:42``::

    redlease:{invoice:42}:fenced        HASH  the resource's fields
    redlease:{invoice:42}:fenced:meta   HASH  fence   = highest fence accepted
                                              version = number of writes accepted

Both keys carry the hash tag ``{name}``, so each script touches one Redis Cluster slot; a
resource named like the lock that guards it lands in the lock's slot too. The meta key never
expires and is never deleted by redlease: ``delete()`` removes the data and keeps the mark, so
a stale holder cannot resurrect a deleted resource. The names do not collide with a lock's keys
(``:lock``, ``:fence``, ``:queue``, ``:handoff``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from . import validate
from .scripts import Script, load

__all__ = [
    "MAX_FENCE",
    "MAX_FIELDS",
    "READ",
    "SCRIPTS",
    "VALUE",
    "WRITE",
    "FencedKeys",
    "FencedRecord",
    "Mode",
    "WriteResult",
    "decode_read",
    "decode_write",
    "fence",
    "fields",
    "value",
]

MAX_FENCE = 2**53
"""The largest fence accepted: Lua's numbers compare integers exactly up to here."""
MAX_FIELDS = 1000
"""The most fields one write may set (one script call; Lua's ``unpack`` has a limit)."""
VALUE = b"value"
"""The field that :meth:`~redlease.FencedStore.write` stores its one value in."""

Mode = Literal["replace", "merge", "delete"]


@dataclass(frozen=True)
class FencedKeys:
    """The two Redis keys of one fenced resource."""

    data: bytes
    meta: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> FencedKeys:
        """Keys for ``name`` (validated, encoded) under ``prefix`` (validated)."""
        base = prefix.encode() + b":{" + name + b"}:fenced"
        return cls(data=base, meta=base + b":meta")

    @property
    def all(self) -> list[bytes]:
        """KEYS of both scripts, in order."""
        return [self.data, self.meta]


@dataclass(frozen=True)
class FencedRecord:
    """A fenced resource as read in one step.

    ``fields``: every field (bytes -> bytes; empty if never written or deleted). ``value``:
    the ``value`` field, what :meth:`~redlease.FencedStore.write` stores (``None`` if absent).
    ``fence``: the highest fence accepted so far (``None`` if never written): a writer with a
    lower one will be refused. ``version``: how many writes were accepted (0 if none); it
    grows by one with each, so it orders them.
    """

    fence: int | None
    version: int
    fields: dict[bytes, bytes] = field(default_factory=dict)

    @property
    def value(self) -> bytes | None:
        """The ``value`` field, or ``None``."""
        return self.fields.get(VALUE)


@dataclass(frozen=True)
class WriteResult:
    """The decoded reply of ``fenced_write.lua``."""

    accepted: bool
    fence: int
    """The writer's fence if accepted; the highest fence seen (which refused it) if not."""
    version: int


# -- argument checks ------------------------------------------------------------------------
def fence(value: Any, arg: str = "fence") -> int:
    """A fencing token: an ``int`` in ``[0, 2**53]`` (``lock.fence`` of a held lock)."""
    if value is None:
        raise TypeError(
            f"{arg} must be an int, got None (is the lock held? lock.fence is None when not)"
        )
    return validate.count(value, arg, minimum=0, maximum=MAX_FENCE)


def value(item: Any, arg: str = "value") -> bytes:
    """A stored value: ``bytes``, ``str`` (UTF-8), ``int`` or ``float`` -> bytes."""
    if isinstance(item, (bytes, bytearray, memoryview)):
        return bytes(item)
    if isinstance(item, str):
        return item.encode()
    if isinstance(item, bool) or not isinstance(item, (int, float)):
        raise TypeError(f"{arg} must be bytes, str, int or float, got {type(item).__name__}")
    return repr(item).encode()


def fields(mapping: Any, arg: str = "fields") -> list[bytes]:
    """A non-empty mapping of field name -> value, flattened to ``[f1, v1, f2, v2, ...]``."""
    if not isinstance(mapping, Mapping):
        raise TypeError(f"{arg} must be a mapping of field -> value, got {type(mapping).__name__}")
    if not mapping:
        raise ValueError(f"{arg} must not be empty")
    if len(mapping) > MAX_FIELDS:
        raise ValueError(f"{arg} must have at most {MAX_FIELDS} fields, got {len(mapping)}")
    flat: list[bytes] = []
    for name, item in mapping.items():
        flat.append(validate.name(name, f"{arg} key"))
        flat.append(value(item, f"{arg}[{name!r}]"))
    return flat


# -- replies --------------------------------------------------------------------------------
def _ints(raw: Any, count: int, script: str) -> list[int]:
    try:
        return [int(x) for x in raw[:count]]
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from {script}: {raw!r}") from exc


def decode_write(raw: Any) -> WriteResult:
    """``{accepted, fence, version}`` -> :class:`WriteResult`."""
    numbers = _ints(raw, 3, "fenced_write.lua")
    if len(numbers) != 3 or numbers[0] not in (0, 1):
        raise ValueError(f"unexpected reply from fenced_write.lua: {raw!r}")
    accepted, seen, version = numbers
    return WriteResult(accepted=bool(accepted), fence=seen, version=version)


def decode_read(raw: Any) -> FencedRecord:
    """``{fence, version, field, value, ...}`` -> :class:`FencedRecord`."""
    numbers = _ints(raw, 2, "fenced_read.lua")
    rest = list(raw[2:])
    if len(numbers) != 2 or len(rest) % 2:
        raise ValueError(f"unexpected reply from fenced_read.lua: {raw!r}")
    as_bytes = [x.encode() if isinstance(x, str) else bytes(x) for x in rest]
    highest, version = numbers
    return FencedRecord(
        fence=None if highest < 0 else highest,
        version=version,
        fields=dict(zip(as_bytes[::2], as_bytes[1::2], strict=True)),
    )


WRITE = load("fenced_write")
READ = load("fenced_read")
SCRIPTS: tuple[Script, ...] = (WRITE, READ)
