"""The Lua scripts, loaded once from ``redlease/lua`` and run by EVALSHA.

Each ``.lua`` file documents its KEYS/ARGV contract and return values in its header. Lock
scripts that hand the lock on to waiters are prefixed with ``lock_lib.lua``, the one place where
the queue and reservation logic is written. A script's SHA1 is computed here; a test checks it
against ``SCRIPT LOAD`` on a real server.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

__all__ = [
    "ACQUIRE",
    "EXTEND",
    "FENCE",
    "INSPECT",
    "LEAVE",
    "RELEASE",
    "RENEW",
    "Script",
    "load",
]


@dataclass(frozen=True)
class Script:
    """A Lua script: its name, source and SHA1 (the EVALSHA handle)."""

    name: str
    source: str
    sha: str


def _read(filename: str) -> str:
    return resources.files("redlease").joinpath("lua").joinpath(filename).read_text()


def load(name: str, *, prelude: tuple[str, ...] = ()) -> Script:
    """Load ``lua/<name>.lua``, preceded by the ``prelude`` files, as a :class:`Script`."""
    source = "\n".join([*(_read(p + ".lua") for p in prelude), _read(name + ".lua")])
    return Script(name=name, source=source, sha=hashlib.sha1(source.encode()).hexdigest())


_LOCK_LIB = ("lock_lib",)
ACQUIRE = load("acquire", prelude=_LOCK_LIB)
RELEASE = load("release", prelude=_LOCK_LIB)
LEAVE = load("leave", prelude=_LOCK_LIB)
EXTEND = load("extend")
RENEW = load("renew")
INSPECT = load("inspect")
FENCE = load("fence")
