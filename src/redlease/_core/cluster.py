"""What a Redis Cluster must offer redlease: a pure check of a node's ``INFO server``.

Waiters on a cluster are woken by sharded pub/sub (``SSUBSCRIBE`` / ``SPUBLISH`` on a channel
in the lock's own slot), which Redis has from 7.0 (every valkey release has it). On an older
node the lock scripts would fail on ``SPUBLISH`` and a waiter's ``SSUBSCRIBE`` would be
refused: the cluster adapter asks each master once, before its first script, and refuses
with :func:`sharded_pubsub_refusal`'s message instead.
"""

from __future__ import annotations

from collections.abc import Sequence

from .keys import hash_tag

__all__ = ["SHARDED_PUBSUB_SINCE", "check_one_slot", "server_version", "sharded_pubsub_refusal"]

SHARDED_PUBSUB_SINCE = (7, 0)
"""The first Redis version with sharded pub/sub (``SSUBSCRIBE`` / ``SPUBLISH``)."""


def check_one_slot(keys: Sequence[bytes]) -> None:
    """Raise ValueError, naming ``name``, unless ``keys`` share one hash tag (one slot).

    Every primitive's keys are ``<prefix>:{<name>}:...``; a name starting with ``}`` leaves
    the tag empty, so Redis hashes each whole key and they land in different slots, which a
    cluster refuses (CROSSSLOT). Said before anything is sent: it is the name's fault, not an
    outage's. (Cheap: a few byte searches per call.)
    """
    tag = hash_tag(keys[0]) if keys else b""
    for key in keys[1:]:
        if hash_tag(key) != tag:
            raise ValueError(
                "name must not start with '}' on a Redis Cluster: its keys "
                f"({keys[0].decode(errors='replace')}, ...) would have no hash tag in "
                "common and fall in different slots"
            )


def server_version(info: str | bytes) -> tuple[int, ...] | None:
    """``redis_version`` of an ``INFO server`` reply as numbers (``"6.2.14"`` -> (6, 2, 14)),
    or None when the reply has none, or one that is not dotted numbers."""
    text = info.decode(errors="replace") if isinstance(info, bytes) else info
    for line in text.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "redis_version":
            parts = value.strip().split(".")
            if not parts or not all(part.isdigit() for part in parts):
                return None
            return tuple(int(part) for part in parts)
    return None


def sharded_pubsub_refusal(info: str | bytes, node: str) -> str | None:
    """None if the cluster node whose ``INFO server`` reply is ``info`` has sharded pub/sub;
    else why redlease cannot run on it, naming ``node`` and the version required.

    A reply without a readable ``redis_version`` (a server that does not say) is not
    refused: if it lacks the commands, the scripts' own errors say so.
    """
    version = server_version(info)
    if version is None or version[:2] >= SHARDED_PUBSUB_SINCE:
        return None
    need = ".".join(map(str, SHARDED_PUBSUB_SINCE))
    return (
        f"redlease on a Redis Cluster needs Redis >= {need} on every master (sharded pub/sub, "
        f"SSUBSCRIBE/SPUBLISH, wakes the waiters in each lock's slot); node {node} runs "
        f"{'.'.join(map(str, version))}"
    )
