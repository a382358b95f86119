"""Key layout: every key of one primitive starts with ``<prefix>:{<name>}:``.

The braces are Redis Cluster's hash tag: all keys of one lock, inventory or other primitive
fall in one slot, so that every script touches one slot (a cluster requires it). Each
primitive's core module names its own keys on top of :func:`base`; for prefix ``redlease``
and the lock ``orders:42``::

    redlease:{orders:42}:lock       redlease:{orders:42}:fence      ...
"""

from __future__ import annotations

__all__ = ["base", "hash_tag", "tagged"]


def base(prefix: str, name: bytes) -> bytes:
    """``<prefix>:{<name>}:``, the start of every key of the primitive ``name``.

    ``prefix`` and ``name`` must be validated already (see :mod:`redlease._core.validate`).
    """
    return prefix.encode() + b":{" + name + b"}:"


def tagged(prefix: str, name: bytes, *suffixes: str) -> tuple[bytes, ...]:
    """The keys ``<prefix>:{<name>}:<suffix>`` for each suffix, in order."""
    start = base(prefix, name)
    return tuple(start + suffix.encode() for suffix in suffixes)


def hash_tag(key: bytes) -> bytes:
    """The part of ``key`` Redis Cluster hashes: between the first ``{`` and the next ``}``.

    The whole key when it has no such non-empty tag (Redis' own rule). A channel carrying the
    same tag falls in the same slot as the key: the lock scripts tell waiters on one.
    """
    start = key.find(b"{")
    if start >= 0:
        end = key.find(b"}", start + 1)
        if end > start + 1:
            return key[start + 1 : end]
    return key
