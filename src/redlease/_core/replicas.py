"""Replica acknowledgement of an acquisition: ``WAIT`` / ``WAITAOF`` after the acquire script.

``WAIT n timeout`` blocks until ``n`` replicas have acknowledged every write made so far *on
the connection it is sent on*, or ``timeout`` ms passed, and answers how many did. redlease
sends it pipelined right after the acquire script, on the same connection (anywhere else it
would acknowledge nothing of the lock). ``WAITAOF 1 n timeout`` (Redis / valkey >= 7.2) also
waits until the master and ``n`` replicas fsynced those writes to their append-only files,
and answers ``[local, replicas]``.

What it does not give: a replica that acknowledged may still lose the write (it had not
fsynced; or a failover picks another replica), and a write that was not acknowledged may
still be applied. See ``docs/safety.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import LockUnavailable, ReplicasUnavailable

__all__ = ["Ack", "decode_ack", "unacknowledged", "wait_command"]


def wait_command(replicas: int, timeout_ms: int, aof: bool) -> tuple[Any, ...]:
    """The command to pipeline after the acquire script (``timeout_ms`` >= 1: 0 is forever)."""
    if timeout_ms < 1:
        raise ValueError(f"timeout_ms must be >= 1 (WAIT 0 blocks forever), got {timeout_ms}")
    if aof:
        return ("WAITAOF", 1, replicas, timeout_ms)
    return ("WAIT", replicas, timeout_ms)


@dataclass(frozen=True)
class Ack:
    """What the server said: ``replicas`` acknowledged; ``local`` (WAITAOF only): the master
    fsynced it itself."""

    replicas: int
    local: bool | None = None

    def enough(self, wanted: int) -> bool:
        """Whether ``wanted`` replicas acknowledged (and, with WAITAOF, the master fsynced)."""
        return self.replicas >= wanted and self.local is not False


def decode_ack(reply: Any, aof: bool) -> Ack:
    """Decode the reply of :func:`wait_command`, refusing anything else."""
    try:
        if aof:
            local, replicas = reply
            return Ack(int(replicas), bool(int(local)))
        return Ack(int(reply))
    except (TypeError, ValueError) as exc:
        raise ValueError(
            f"unexpected reply from {'WAITAOF' if aof else 'WAIT'}: {reply!r}"
        ) from exc


def unacknowledged(
    name: Any, acked: Any, aof: bool, wanted: int, timeout: float
) -> LockUnavailable | None:
    """The error to raise after taking lock ``name`` when fewer than ``wanted`` replicas
    acknowledged it within ``timeout`` s (``acked``: the wait's reply, or the server's refusal
    of it as an exception, e.g. no WAITAOF: no downgrade to WAIT); ``None``: enough did."""
    if isinstance(acked, Exception):
        command = "WAITAOF (Redis or valkey >= 7.2)" if aof else "WAIT"
        return LockUnavailable(
            f"lock {name!r} was taken but the server refused {command}: {acked}; released it again",
            name=name,
        )
    ack = decode_ack(acked, aof)
    if ack.enough(wanted):
        return None
    local = "" if ack.local is None else f"; fsynced by the master: {ack.local}"
    return ReplicasUnavailable(
        f"lock {name!r} was taken but only {ack.replicas} of {wanted} replica(s) "
        f"acknowledged it within {timeout} s{local}: released it again",
        name=name,
        acknowledged=ack.replicas,
        wanted=wanted,
        fsynced_locally=ack.local,
    )
