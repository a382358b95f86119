"""Renewals on a Redis Cluster: a watchdog batch split by slot, pipelined per node.

A renewal script may touch one slot only, so the batch is split by slot; the calls for the
slots of one node go out together on one connection, and every node is written to before any
is read: one round trip per node per tick, whatever the number of locks.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from redis.crc import key_slot
from redis.exceptions import (
    AskError,
    ConnectionError,
    NoScriptError,
    RedisError,
    ResponseError,
    TimeoutError,
)

from .._core import renewals
from .._core.bounds import MIN_WAIT
from .._core.kept import forget_frames
from .._core.lease import Holding
from .._core.scripts import Script
from .._redispy_versions import AsyncConnections
from .one_server import AsyncBackend
from .server import connecting_by

__all__ = ["AsyncClusterRenewal"]

_E = TypeVar("_E", bound=BaseException)


class _Router(Protocol):
    """What a cluster renewal asks of the cluster backend (``cluster.AsyncClusterBackend``)."""

    async def owner(self, slot: int) -> AsyncBackend: ...

    async def run(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        timeout: float | None = None,
    ) -> Any: ...

    def mark_stale(self) -> None: ...


@dataclass(frozen=True)
class AsyncClusterRenewal:
    """Renews batches of holdings on a cluster: one script call per slot, pipelined per node.

    A renewal script may touch one slot only, so the batch is split by slot; the calls for the
    slots of one node go out together on one connection, and every node is written to before
    any is read: one round trip per node per tick.
    """

    backend: _Router

    async def renew(self, script: Script, due: list[Holding]) -> list[bool]:
        """Per holding True (renewed) / False (lost); raises if a node did not answer (the
        watchdog then tries the whole batch again soon: renewing twice is harmless).

        Bounded by the shortest lease left in the batch, as on one server.
        """
        end = min(h.renew_by() for h in due)
        with connecting_by(end):  # a connection opened for it: by the earliest lease end
            return await self._renew(script, due, end)

    async def _renew(self, script: Script, due: list[Holding], end: float) -> list[bool]:
        backend = self.backend
        by_node: dict[int, tuple[AsyncBackend, dict[int, list[int]]]] = {}
        for i, holding in enumerate(due):
            slot = key_slot(holding.key)
            node = await backend.owner(slot)
            by_node.setdefault(id(node), (node, {}))[1].setdefault(slot, []).append(i)
        left = max(end - time.monotonic(), MIN_WAIT)
        result: list[bool] = [False] * len(due)
        errors: list[Exception] = []
        sent: list[tuple[_Batch, list[list[int]]]] = []
        for node, slots in by_node.values():  # write to every node before reading any
            groups = list(slots.values())
            calls = [renewals.batch_call([due[i] for i in group]) for group in groups]
            try:
                sent.append((await _Batch.send(node, script, calls), groups))
            except RedisError as exc:
                errors.append(exc)
        for batch, groups in sent:
            replies = await batch.receive(left)
            for group, reply in zip(groups, replies, strict=True):
                if isinstance(reply, AskError):  # this slot moved: once on its new owner
                    keys, args = renewals.batch_call([due[i] for i in group])
                    try:
                        reply = await backend.run(script, keys, args, left)
                    except RedisError as exc:
                        reply = exc
                if isinstance(reply, Exception):
                    errors.append(reply)
                    continue
                try:
                    for i, ok in zip(group, renewals.decode(reply, len(group)), strict=True):
                        result[i] = ok
                except ValueError as exc:
                    errors.append(exc)
        if errors:
            for dropped in errors[:-1]:  # not left in a cycle (see kept.py)
                forget_frames(dropped)
            failed = errors[-1]
            if isinstance(failed, (ConnectionError, TimeoutError)):
                backend.mark_stale()
            raise failed
        return result


class _Batch:
    """Script calls pipelined on one connection of one node: written at once, read in turn."""

    def __init__(self, node: AsyncBackend, conn: Any, script: Script, calls: list[Any]) -> None:
        self.node = node
        self.conn = conn
        self.script = script
        self.calls = calls
        self.sent_at = time.monotonic()

    @classmethod
    async def send(
        cls, node: AsyncBackend, script: Script, calls: list[tuple[list[bytes], list[Any]]]
    ) -> _Batch:
        """Write one EVALSHA per call in ``calls`` (KEYS, ARGV) on one connection of ``node``."""
        conn = await node.checkout()
        try:
            with node.translated():
                await conn.send_packed_command(
                    conn.pack_commands([("EVALSHA", script.sha, len(k), *k, *a) for k, a in calls])
                )
        except BaseException:
            await node.discard(conn)
            raise
        return cls(node, conn, script, calls)

    async def receive(self, timeout: float) -> list[Any]:
        """Each call's reply, or the error it got (within ``timeout`` of sending).

        A call the node answered NOSCRIPT is sent again with EVAL on the same connection.
        """
        node, conn = self.node, self.conn
        replies: list[Any] = []
        try:
            for _ in self.calls:
                try:
                    replies.append(await node.read(conn, self.sent_at, timeout))
                except ResponseError as exc:
                    replies.append(_without_frames(exc))
            for i, (keys, args) in enumerate(self.calls):
                if isinstance(replies[i], NoScriptError):
                    await AsyncConnections.send(
                        conn, "EVAL", self.script.source, len(keys), *keys, *args
                    )
                    try:
                        replies[i] = await node.read(conn, self.sent_at, timeout)
                    except ResponseError as exc:
                        replies[i] = _without_frames(exc)
        except BaseException as exc:  # broken or late: the connection is out of sync
            await node.discard(conn)
            if not isinstance(exc, RedisError):
                raise
            return replies + [_without_frames(exc)] * (len(self.calls) - len(replies))
        await node.release(conn)
        return replies


def _without_frames(exc: _E) -> _E:
    """``exc`` without its traceback (see ``_core/kept.forget_frames``): a reply kept in a
    local of a frame its traceback passed would hold that frame, and its callers', in a cycle."""
    forget_frames(exc)
    return exc
