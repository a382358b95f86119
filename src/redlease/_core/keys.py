"""Key layout: every key of one primitive starts with ``<prefix>:{<name>}:``.

The braces are Redis Cluster's hash tag: all keys of one lock, inventory or other primitive
fall in one slot, so that every script touches one slot (a cluster requires it). Each
primitive's core module names its own keys on top of :func:`base`; for prefix ``redlease``
and the lock ``orders:42``::

    redlease:{orders:42}:lock       redlease:{orders:42}:fence      ...
"""

from __future__ import annotations

__all__ = ["base", "tagged"]


def base(prefix: str, name: bytes) -> bytes:
    """``<prefix>:{<name>}:``, the start of every key of the primitive ``name``.

    ``prefix`` and ``name`` must be validated already (see :mod:`redlease._core.validate`).
    """
    return prefix.encode() + b":{" + name + b"}:"


def tagged(prefix: str, name: bytes, *suffixes: str) -> tuple[bytes, ...]:
    """The keys ``<prefix>:{<name>}:<suffix>`` for each suffix, in order."""
    start = base(prefix, name)
    return tuple(start + suffix.encode() for suffix in suffixes)
