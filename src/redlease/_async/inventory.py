"""Inventory: a stock of units sold through short, server-timed holds (a flash sale)."""

from __future__ import annotations

from typing import Any

import redis.asyncio
from redis.exceptions import RedisError

from .._core import inventory as core
from .._core import validate
from .._core.inventory import InventoryKeys, Reservation, Stock
from .._core.scripts import Script
from ..errors import InventoryUnavailable
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncInventory"]


class AsyncInventory(AsyncPrimitive):
    """A stock of identical units (one SKU), reserved, confirmed and cancelled atomically.

    ``Inventory(client, "sku:1001")``; ``restock(100)``; then per purchase
    ``reserve(user=..., order_id=..., qty=1, hold=300.0, per_user_limit=1)`` holds units for
    ``hold`` seconds, ``confirm(order_id)`` sells them (payment went through) and
    ``cancel(order_id)`` puts them back; ``withdraw(qty)`` takes unsold units out of sale.
    A hold that is neither confirmed nor cancelled by its deadline expires and its units
    return to stock. Each call is one Lua script, one round trip; key layout and lifecycle
    are described in :mod:`redlease._core.inventory`.

    Guaranteed, while the server keeps its data:

    * ``available + reserved + sold == total`` at every moment, none negative: no unit is
      sold twice, none is lost;
    * an order id names one purchase forever: ``reserve`` with a known id returns that order
      in its current state (reserved, sold, cancelled or expired) and never takes more units,
      so a request retried after a timeout or a crash is safe;
    * ``per_user_limit`` counts the units of the user's live holds and sold orders;
    * hold deadlines follow the server's clock (``TIME``), never a client's;
    * a refusal (:class:`~redlease.SoldOut`, :class:`~redlease.LimitExceeded`) never counts a
      hold that has already expired;
    * a Redis failure raises :class:`~redlease.InventoryUnavailable` with the cause chained.

    With ``retention``, an order id is kept for that long after its order settled (sold,
    cancelled or expired), then forgotten: idempotency holds for retries within the
    retention; a later ``reserve`` with the id is a new purchase. Default: kept forever.

    Not guaranteed: that a hold survives a failover to a replica that had not received it
    (replication is asynchronous), nor exact deadlines when the server's clock jumps.
    """

    _unavailable_error = InventoryUnavailable
    _what = "inventory"

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        retention: float | None = None,
    ) -> None:
        """Describe an inventory; nothing is sent to Redis until a method is called.

        :param client: your redis-py client.
        :param name: the inventory's name (str or bytes), e.g. the SKU; keys are
            ``<prefix>:{<name>}:...``.
        :param prefix: the key prefix (no white space or braces).
        :param retention: seconds a settled order id is kept for retries (1 s to a year),
            then forgotten; ``None`` (default): forever. Choose it longer than any client
            may retry, and use the same value in every client of the inventory.
        """
        check_client(client)
        self._client = client
        self.name = name
        self.retention = retention
        self._retain = core.retention(retention)
        self._keys = InventoryKeys.build(validate.prefix(prefix), validate.name(name))
        # reserve() packs its command itself (the hot path): str arguments are encoded as
        # the client's own connections would encode them.
        encoder = getattr(client, "get_encoder")()  # noqa: B009 (redis-py leaves it untyped)
        self._encoding: tuple[str, str] = (encoder.encoding, encoder.encoding_errors)
        self._reserve_head = ("", b"")  # (script SHA, pack_head for it)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r}>"

    async def restock(self, qty: int) -> Stock:
        """Add ``qty`` units (int >= 0) to the stock; returns the counts after it.

        Raises ValueError naming ``qty``, adding nothing, when the total would pass
        ``2**53 - 1`` (where Lua stops counting units exactly).
        """
        units = core.units(qty, "qty", minimum=0)
        reply = await self._run(core.RESTOCK, self._keys.all, [units, self._retain], "restock")
        return core.decode_restock(reply, self.name)

    async def withdraw(self, qty: int) -> Stock:
        """Take ``qty`` units (int >= 1) out of sale, e.g. damaged or sold elsewhere.

        The inverse of :meth:`restock`: ``available`` and ``total`` drop by ``qty``; units
        held for an order or sold are never withdrawn. All or nothing: raises
        :class:`~redlease.SoldOut` when fewer than ``qty`` units are available (expired
        holds are returned to stock first). Returns the counts after it.
        """
        units = core.units(qty, "qty")
        reply = await self._run(core.WITHDRAW, self._keys.all, [units, self._retain], "withdraw")
        return core.decode_withdraw(reply, self.name)

    async def reserve(
        self,
        *,
        user: str,
        order_id: str,
        qty: int = 1,
        hold: float = 300.0,
        per_user_limit: int | None = None,
    ) -> Reservation:
        """Hold ``qty`` units for order ``order_id`` of ``user`` for ``hold`` seconds.

        Returns the :class:`~redlease.Reservation`: the new one (``changed`` is True), or, for
        an order id seen before, that order in its current state (``changed`` is False), also
        if it was cancelled or has expired since; a known id never takes more units.
        Raises, in this order of checks: :class:`~redlease.OrderConflict` when the id belongs
        to a purchase of another user or qty, :class:`~redlease.LimitExceeded` when the user's
        live and sold units plus ``qty`` would pass ``per_user_limit`` (``None``: no limit),
        :class:`~redlease.SoldOut` when fewer than ``qty`` units are available.
        """
        order = self._ident(order_id, "order_id")
        buyer = self._ident(user, "user")
        units = core.units(qty, "qty")
        hold_ms = validate.ttl_ms(hold, "hold")
        limit = core.per_user_limit(per_user_limit)
        args = [order, buyer, b"%d" % units, b"%d" % hold_ms, b"%d" % limit, b"%d" % self._retain]
        script = core.RESERVE
        sha, head = self._reserve_head
        if sha != script.sha:
            head = core.pack_head(script, self._keys.all, len(args))
            self._reserve_head = (script.sha, head)
        reply = await self._send(script, args, "reserve", core.pack(head, args))
        return core.decode_reserve(reply, self.name, order_id, user, units, hold_ms, self._encoding)

    async def confirm(self, order_id: str) -> Reservation:
        """Sell a reserved order (after payment); returns it, now ``sold``.

        Confirming a sold order again returns it unchanged. Raises
        :class:`~redlease.OrderClosed` if the order expired or was cancelled (nothing is sold:
        refund, or reserve anew) and :class:`~redlease.OrderNotFound` for an unknown id.
        """
        return await self._required(core.CONFIRM, "confirm", order_id)

    async def cancel(self, order_id: str) -> Reservation:
        """Release a reserved order: its units return to stock; returns it, now ``cancelled``.

        Cancelling a cancelled or expired order returns it unchanged (its units are already
        back). Raises :class:`~redlease.OrderClosed` for a sold order (a refund is not a
        cancel) and :class:`~redlease.OrderNotFound` for an unknown id.
        """
        return await self._required(core.CANCEL, "cancel", order_id)

    async def order(self, order_id: str) -> Reservation | None:
        """The order ``order_id`` as it stands now (read-only), or ``None`` if unknown."""
        return await self._order(core.ORDER, [self._ident(order_id, "order_id")], "read", order_id)

    async def snapshot(self) -> Stock:
        """The counts now, read atomically (read-only); expired holds count as available."""
        return core.decode_stock(await self._run(core.SNAPSHOT, self._keys.all, [], "read"))

    # -- plumbing ---------------------------------------------------------------------------
    def _ident(self, value: Any, arg: str) -> bytes:
        """A user or order id, encoded as the client's ``encoding`` says, by every call alike
        (redis-py with hiredis would write a str as UTF-8 whatever that says)."""
        encoding, errors = self._encoding
        return core.ident(value, arg).encode(encoding, errors)

    async def _required(self, script: Script, action: str, order_id: str) -> Reservation:
        args = [self._ident(order_id, "order_id"), self._retain]
        reservation = await self._order(script, args, action, order_id)
        if reservation is None:
            raise core.not_found(self.name, order_id)
        return reservation

    async def _order(
        self, script: Script, args: list[Any], action: str, order_id: str
    ) -> Reservation | None:
        return core.decode_reply(
            await self._run(script, self._keys.all, args, action),
            self.name,
            order_id,
            self._encoding,
        )

    async def _send(self, script: Script, args: list[Any], action: str, packed: Any) -> Any:
        """Run ``script`` sent as ``packed`` (the same command, packed once)."""
        backend = self._runtime().backend
        try:
            pending = await backend.send(script, self._keys.all, args, packed)
            return await backend.receive(pending, None)
        except RedisError as exc:
            raise self._unavailable(action, exc) from exc
