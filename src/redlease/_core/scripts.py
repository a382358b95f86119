"""Loading the Lua scripts from ``redlease/lua``, to be run by EVALSHA.

Each ``.lua`` file documents its KEYS/ARGV contract and return values in its header. A script
may be prefixed with library files (``prelude``): ``common_lib.lua`` first (the server's
clock, fences, telling waiters), then its family's, such as ``lock_lib.lua`` for the scripts
that hand a lock on to waiters. The scripts themselves are named in the core module of the
primitive they serve (``_core/lock.py``, ``_core/inventory.py``, ...). A script's SHA1 is
computed here; a test pins every SHA as a literal and checks it against ``SCRIPT LOAD``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from importlib import resources

__all__ = ["Script", "load"]


@dataclass(frozen=True)
class Script:
    """A Lua script: its name, source and SHA1 (the EVALSHA handle)."""

    name: str
    source: str
    sha: str


def _read(filename: str) -> str:
    return resources.files("redlease").joinpath("lua").joinpath(filename).read_text()


def load(name: str, *, prelude: tuple[str, ...] = ()) -> Script:
    """Load ``lua/<name>.lua``, preceded by the ``prelude`` files, as a :class:`Script`.

    A prelude starts with ``common_lib``, which every other library builds on.
    """
    if prelude and prelude[0] != "common_lib":
        raise ValueError(f"prelude of {name!r} must start with 'common_lib', got {prelude!r}")
    source = "\n".join([*(_read(p + ".lua") for p in prelude), _read(name + ".lua")])
    return Script(name=name, source=source, sha=hashlib.sha1(source.encode()).hexdigest())
