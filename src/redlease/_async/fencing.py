"""FencedStore: data in Redis that refuses writes carrying an older fencing token."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import redis.asyncio

from .._core import fencing as core
from .._core import validate
from .._core.fencing import FencedKeys, FencedRecord, Mode
from ..errors import FencedStoreUnavailable, StaleFence
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncFencedStore"]


class AsyncFencedStore(AsyncPrimitive):
    """One resource (a hash of fields) whose writes are checked against fencing tokens.

    ``FencedStore(client, "invoice:42")``; under a lock, ``store.write(lock.fence, data)``.
    Every change (``write``, ``update``, ``delete``) is one Lua compare-and-set that accepts it
    only if its fence is **at least** the highest fence this resource has accepted, and records
    that fence in the same step. A holder whose lease ran out while it was paused comes back
    with an older fence than its successor's: its late write raises
    :class:`~redlease.StaleFence` and changes nothing. Equal fences are accepted, so a holder
    may write several times under one acquisition (``docs/fencing.md`` says why).

    Each accepted change returns the resource's new ``version`` (1, 2, 3, ...: accepted writes
    in the order the server applied them). A Redis failure raises
    :class:`~redlease.FencedStoreUnavailable` with the cause chained.

    It guards only what it stores. For a SQL table, the same check is one ``UPDATE ... WHERE
    fence <= :fence`` (``docs/fencing.md``). The high-water mark lives in Redis without expiry;
    it is only as durable as the server (``appendonly yes``).
    """

    _unavailable_error = FencedStoreUnavailable
    _what = "fenced resource"

    def __init__(
        self, client: redis.asyncio.Redis, name: str | bytes, *, prefix: str = "redlease"
    ) -> None:
        """Describe a resource; nothing is sent to Redis until a method is called.

        :param client: your redis-py client.
        :param name: the resource's name (str or bytes); keys are ``<prefix>:{<name>}:fenced``
            and ``...:fenced:meta``. Naming it like the lock that guards it keeps both in one
            Redis Cluster slot.
        :param prefix: the key prefix (no white space or braces).
        """
        check_client(client)
        self._client = client
        self.name = name
        self._keys = FencedKeys.build(validate.prefix(prefix), validate.name(name))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    async def write(self, fence: int, value: bytes | str | int | float) -> int:
        """Replace the resource with one ``value`` (the ``value`` field); returns the version.

        Raises :class:`~redlease.StaleFence` if ``fence`` is below the highest accepted.
        """
        flat = [core.VALUE, core.value(value)]
        return await self._write(fence, "replace", flat)

    async def update(self, fence: int, fields: Mapping[str | bytes, Any]) -> int:
        """Set ``fields`` (name -> bytes, str, int or float), keep the others; returns the version.

        Raises :class:`~redlease.StaleFence` if ``fence`` is below the highest accepted.
        """
        return await self._write(fence, "merge", core.fields(fields))

    async def replace(self, fence: int, fields: Mapping[str | bytes, Any]) -> int:
        """Make ``fields`` the resource's only fields; returns the version.

        Raises :class:`~redlease.StaleFence` if ``fence`` is below the highest accepted.
        """
        return await self._write(fence, "replace", core.fields(fields))

    async def delete(self, fence: int) -> int:
        """Remove every field; returns the version. The high-water mark is kept, so a stale
        holder cannot bring the resource back.

        Raises :class:`~redlease.StaleFence` if ``fence`` is below the highest accepted.
        """
        return await self._write(fence, "delete", [])

    async def read(self) -> FencedRecord:
        """The fields, the highest fence accepted and the version, read in one step."""
        return core.decode_read(await self._run(core.READ, self._keys.all, [], "read"))

    # -- plumbing ---------------------------------------------------------------------------
    async def _write(self, fence: int, mode: Mode, flat: list[bytes]) -> int:
        token = core.fence(fence)
        result = core.decode_write(
            await self._run(core.WRITE, self._keys.all, [token, mode, *flat], "write")
        )
        if not result.accepted:
            raise StaleFence(
                f"write to {self.name!r} refused: fence {token} is older than {result.fence}, "
                "the highest this resource accepted (the lock was lost and a newer holder wrote)",
                name=self.name,
                fence=token,
                highest=result.fence,
            )
        return result.version
