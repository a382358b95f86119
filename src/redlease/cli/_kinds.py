"""Which primitive a name is: the keys each kind writes, as the library's own builders name them.

Every primitive of one name has keys of its own (``_core/keys.py``): a Lock's ``lock``,
``fence``, ``queue``, ``handoff``, a Semaphore's ``semaphore:...``, a Once's ``once:...``, and
so on. The first part after ``<prefix>:{<name>}:`` tells the kind; it is read here from the
``_core`` builders, never written out, so that the command line follows the library's layout.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from .._core.election import election_keys
from .._core.fencing import FencedKeys
from .._core.inventory import InventoryKeys
from .._core.latch import LatchKeys
from .._core.lock import LockKeys
from .._core.once import OnceKeys
from .._core.rwlock import rwlock_keys
from .._core.semaphore import semaphore_keys

__all__ = ["HOLDERS", "KINDS", "keys_of", "kind_of_suffix", "present"]

_BUILDERS: dict[str, Callable[[str, bytes], Any]] = {
    "lock": LockKeys.build,
    "semaphore": semaphore_keys,
    "rwlock": rwlock_keys,
    "election": election_keys,
    "latch": LatchKeys.build,
    "inventory": InventoryKeys.build,
    "fenced": FencedKeys.build,
    "once": OnceKeys.build,
}
KINDS = tuple(_BUILDERS)
"""Every kind ``inspect --all`` prints and ``--kind`` accepts."""
HOLDERS = ("lock", "semaphore", "rwlock", "election", "once")
"""The kinds with holders to evict (``redlease release --force``): a Once's is its run in
progress, or the success that keeps its name."""


def keys_of(kind: str, prefix: str, name: bytes) -> list[bytes]:
    """Every key the primitive ``kind`` named ``name`` may write under ``prefix``."""
    keys = _BUILDERS[kind](prefix, name)
    return [getattr(keys, field.name) for field in dataclasses.fields(keys)]


def kind_of_suffix(prefix: str) -> dict[bytes, str]:
    """The first part of a key after ``<prefix>:{<name>}:`` -> the kind that writes it."""
    probe = b"probe"
    start = len(prefix) + len(probe) + 4  # "<prefix>:{probe}:"
    return {
        key[start:].split(b":")[0]: kind for kind in KINDS for key in keys_of(kind, prefix, probe)
    }


def present(client: Any, prefix: str, name: bytes) -> list[str]:
    """The kinds that have a key for ``name`` now (one ``EXISTS`` per kind, in one slot)."""
    return [kind for kind in KINDS if int(client.exists(*keys_of(kind, prefix, name)))]
