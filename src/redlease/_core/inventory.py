"""Inventory: key layout, the order lifecycle, argument checks and reply decoding.

An inventory is a stock of identical units (one SKU) sold through short holds. Every key of one
inventory shares the hash tag ``{name}``, so each script touches one Redis Cluster slot. For
prefix ``redlease`` and name ``sku:1001``::

    redlease:{sku:1001}:stock      HASH  available, reserved, sold, total (units)
    redlease:{sku:1001}:orders     HASH  order id -> "<state>|<qty>|<deadline ms>|<user>"
    redlease:{sku:1001}:holds      ZSET  order id -> hold deadline (server ms), reserved orders
    redlease:{sku:1001}:userholds  ZSET  "<#user>:<user><deadline:015d><order id>", score 0,
                                         reserved orders: one user's holds by ZRANGEBYLEX
    redlease:{sku:1001}:users      HASH  user -> units in the user's reserved and sold orders
    redlease:{sku:1001}:settled    ZSET  order id -> when to forget it (server ms): settled
                                         orders, only with a retention

``stock`` keeps ``available + reserved + sold == total`` after every script, none negative.
``orders`` is the idempotency record: one field per order id (its size: benchmarks/README.md),
kept forever by default. With a *retention* (``Inventory(..., retention=seconds)``), an order
settled (sold, cancelled or expired) is forgotten that long after it was settled: writing
scripts record it in ``settled`` (a little more memory while it waits) and forget at most
:data:`SWEEP` orders whose time came per call, oldest first. So ``orders`` holds the live holds
plus about (orders settled per second) x retention, and a retried ``reserve`` is recognised for
at least the retention after the order settled; after that its id is unknown and would reserve
anew. Orders settled before a retention was in use are kept forever, and clients of one
inventory should use one retention. ``holds`` and ``userholds`` hold only live holds: a
cancelled, expired or sold order leaves both. ``users`` keeps buyers with units held or sold;
one whose units drop to 0 leaves.

The life of an order (:data:`TRANSITIONS`; ``lua/inventory_lib.lua`` has the same table)::

    reserve ──> reserved ──confirm──> sold
                   │ └─────cancel───> cancelled
                   └──deadline passed─> expired

A hold is live while the server's ``TIME`` is before its deadline. An order past its deadline is
expired at once for every reader, and *settled* (its units returned to ``available``) by the
next script that meets it: ``reserve`` settles at most :data:`SWEEP` expired holds per call,
oldest first, and before refusing for lack of stock (or of the user's allowance) it settles the
expired holds that could change that answer, at most as many as the units missing. So a
refusal never blames a hold that has already expired, and no call does unbounded work.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import LimitExceeded, OrderClosed, OrderConflict, OrderNotFound, SoldOut
from . import keys, validate
from .scripts import Script, load

__all__ = [
    "CANCEL",
    "CONFIRM",
    "MAX_RETENTION",
    "MAX_TOTAL",
    "MAX_UNITS",
    "MIN_RETENTION",
    "ORDER",
    "RESERVE",
    "RESTOCK",
    "SCRIPTS",
    "SNAPSHOT",
    "STATES",
    "SWEEP",
    "TRANSITIONS",
    "WITHDRAW",
    "InventoryKeys",
    "Reservation",
    "State",
    "Stock",
    "decode_order",
    "decode_reply",
    "decode_reserve",
    "decode_restock",
    "decode_stock",
    "decode_withdraw",
    "ident",
    "not_found",
    "pack",
    "pack_head",
    "per_user_limit",
    "retention",
    "units",
]

SWEEP = 100
"""Expired holds ``reserve`` settles per call, oldest first (bounded work per call)."""

MAX_RETENTION = 366 * 86400.0
"""The longest retention accepted, in seconds (a year): beyond any payment or retry window."""

MIN_RETENTION = 1.0
"""The shortest retention accepted, in seconds: a retry must still find its order."""

MAX_UNITS = 10**12
"""The largest quantity, restock or limit accepted: far beyond any stock, and small enough that
Lua's floating-point numbers count every unit exactly."""

MAX_TOTAL = 2**53 - 1
"""The largest total an inventory reaches: a restock beyond it is refused (``restock`` raises
ValueError naming ``qty``), since Lua's numbers (doubles) count exactly only up to here."""

State = Literal["reserved", "sold", "cancelled", "expired"]
STATES: tuple[State, ...] = ("reserved", "sold", "cancelled", "expired")

TRANSITIONS: dict[str, dict[State, str]] = {
    # action -> state of the order -> what happens: a new state, "same" (a no-op that returns
    # the order) or "closed" (refused with OrderClosed). An expired order's hold is gone, so
    # cancelling it has nothing left to do; a sold order is never put back on sale by cancel.
    "confirm": {"reserved": "sold", "sold": "same", "cancelled": "closed", "expired": "closed"},
    "cancel": {"reserved": "cancelled", "cancelled": "same", "expired": "same", "sold": "closed"},
}
"""What ``confirm`` and ``cancel`` do in each state; the scripts implement this table."""


@dataclass(frozen=True)
class InventoryKeys:
    """The Redis keys of one inventory, in the order every inventory script takes them."""

    stock: bytes
    orders: bytes
    holds: bytes
    userholds: bytes
    users: bytes
    settled: bytes

    @classmethod
    def build(cls, prefix: str, name: bytes) -> InventoryKeys:
        """Keys for ``name`` (already validated and encoded) under ``prefix``."""
        suffixes = ("stock", "orders", "holds", "userholds", "users", "settled")
        return cls(*keys.tagged(prefix, name, *suffixes))

    @property
    def all(self) -> list[bytes]:
        """KEYS[1..6] of every inventory script."""
        return [self.stock, self.orders, self.holds, self.userholds, self.users, self.settled]


@dataclass(frozen=True)
class Reservation:
    """One order (purchase) as the server saw it when it answered.

    ``expires_at`` is the hold's deadline in server time (seconds since the epoch) while the
    order is ``reserved``, and the moment it ran out once ``expired``; ``None`` when sold or
    cancelled. ``expires_in`` is the hold left, in seconds, when the server answered (``None``
    unless reserved): compare it with your own monotonic clock, not ``expires_at`` with your
    wall clock. ``changed`` is ``True`` when this call made the change (took the units, sold
    or released them) and ``False`` when it found the order already so (a retry).
    Two reservations compare equal when order, user, qty, state and deadline agree.
    """

    order_id: str
    user: str
    qty: int
    state: State
    expires_at: float | None
    expires_in: float | None = field(default=None, compare=False)
    changed: bool = field(default=False, compare=False)

    @property
    def live(self) -> bool:
        """Reserved and not expired when the server answered."""
        return self.state == "reserved"


@dataclass(frozen=True)
class Stock:
    """An inventory's counts in units; expired holds count as available.

    ``available + reserved + sold == total`` always holds.
    """

    available: int
    reserved: int
    sold: int
    total: int


# -- argument checks ------------------------------------------------------------------------
def units(value: Any, arg: str, *, minimum: int = 1) -> int:
    """A count of units: an ``int`` (not ``bool``) with ``minimum <= value <= MAX_UNITS``."""
    return validate.count(value, arg, minimum=minimum, maximum=MAX_UNITS)


def per_user_limit(value: Any, arg: str = "per_user_limit") -> int:
    """``None`` (no limit, sent as 0) or a count of units >= 1."""
    return 0 if value is None else units(value, arg)


def retention(value: Any, arg: str = "retention") -> int:
    """``None`` (keep settled order ids forever, sent as 0) or seconds, ``MIN_RETENTION <=
    value <= MAX_RETENTION``, returned in whole milliseconds."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{arg} must be None or a number of seconds, got {type(value).__name__}")
    if not MIN_RETENTION <= value <= MAX_RETENTION:  # NaN fails too
        raise ValueError(
            f"{arg} must be None or {MIN_RETENTION:g} to {MAX_RETENTION:.0f} seconds "
            f"(a year), got {value!r}"
        )
    return round(value * 1000)


def ident(value: Any, arg: str) -> str:
    """A user or order id: a non-empty ``str``."""
    if not isinstance(value, str):
        raise TypeError(f"{arg} must be a str, got {type(value).__name__}")
    if not value:
        raise ValueError(f"{arg} must not be empty")
    return value


# -- replies --------------------------------------------------------------------------------
UTF8 = ("utf-8", "strict")
"""How ids are encoded unless the client says otherwise (redis-py's default)."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_order(raw: Any, order_id: str, encoding: tuple[str, str] = UTF8) -> Reservation:
    """``{status, state, qty, deadline ms, now ms, user, changed}`` -> :class:`Reservation`;
    the user id as ``encoding`` (the client's: encoding, errors) wrote it."""
    try:
        state = _text(raw[1])
        qty, deadline, now, changed = int(raw[2]), int(raw[3]), int(raw[4]), int(raw[6])
        user = raw[5].decode(*encoding) if isinstance(raw[5], bytes) else str(raw[5])
    except (TypeError, ValueError, IndexError, UnicodeDecodeError) as exc:
        raise ValueError(f"unexpected order reply from an inventory script: {raw!r}") from exc
    if state not in STATES:
        raise ValueError(f"unexpected order state from an inventory script: {raw!r}")
    live = state == "reserved"
    return Reservation(
        order_id=order_id,
        user=user,
        qty=qty,
        state=state,
        expires_at=deadline / 1000 if state in ("reserved", "expired") else None,
        expires_in=max(deadline - now, 0) / 1000 if live else None,
        changed=bool(changed),
    )


def decode_stock(raw: Any) -> Stock:
    """``{"stock", available, reserved, sold, total}`` -> :class:`Stock`."""
    try:
        if _text(raw[0]) != "stock":
            raise ValueError(raw[0])
        return Stock(int(raw[1]), int(raw[2]), int(raw[3]), int(raw[4]))
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected stock reply from an inventory script: {raw!r}") from exc


def decode_restock(raw: Any, name: str | bytes) -> Stock:
    """Decode the reply of restock: the counts after it; ValueError naming ``qty`` when the
    total would have passed :data:`MAX_TOTAL` (nothing was changed)."""
    try:
        status = _text(raw[0])
    except (TypeError, IndexError) as exc:
        raise ValueError(f"unexpected reply from inventory_restock.lua: {raw!r}") from exc
    if status != "full":
        return decode_stock(raw)
    try:
        total, qty = int(raw[1]), int(raw[2])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from inventory_restock.lua: {raw!r}") from exc
    raise ValueError(
        f"qty {qty} would take the total of inventory {name!r} from {total} past "
        f"{MAX_TOTAL} (2**53 - 1), above which units are no longer counted exactly; "
        "nothing was added"
    )


def decode_withdraw(raw: Any, name: str | bytes) -> Stock:
    """Decode the reply of withdraw: the counts after it, or :class:`~redlease.SoldOut`.

    ``SoldOut`` is the same condition as for ``reserve``: fewer than the units asked for are
    available (held and sold units are never withdrawn); nothing was taken.
    """
    try:
        status = _text(raw[0])
    except (TypeError, IndexError) as exc:
        raise ValueError(f"unexpected reply from inventory_withdraw.lua: {raw!r}") from exc
    if status != "soldout":
        return decode_stock(raw)
    try:
        available, requested = int(raw[1]), int(raw[2])
    except (TypeError, ValueError, IndexError) as exc:
        raise ValueError(f"unexpected reply from inventory_withdraw.lua: {raw!r}") from exc
    raise SoldOut(
        f"cannot withdraw {requested} units from inventory {name!r}: {available} available, "
        f"{requested} requested (held and sold units are never withdrawn)",
        name=name,
        available=available,
        requested=requested,
    )


def decode_reply(
    raw: Any, name: str | bytes, order_id: str, encoding: tuple[str, str] = UTF8
) -> Reservation | None:
    """Decode the reply of reserve, confirm, cancel or order: the order, or the refusal raised.

    ``None`` is the order lookup's "no such order"; confirm and cancel raise
    :class:`~redlease.OrderNotFound` instead (see the shell).
    """
    try:
        status = _text(raw[0])
    except (TypeError, IndexError) as exc:
        raise ValueError(f"unexpected reply from an inventory script: {raw!r}") from exc
    where = f"inventory {name!r}"
    if status == "order":
        return decode_order(raw, order_id, encoding)
    if status == "missing":
        return None
    if status == "closed":
        order = decode_order(raw, order_id, encoding)
        raise OrderClosed(
            f"order {order_id!r} of {where} is {order.state}: it cannot be "
            f"{'confirmed' if order.state in ('cancelled', 'expired') else 'cancelled'}",
            name=name,
            reservation=order,
        )
    if status == "conflict":
        order = decode_order(raw, order_id, encoding)
        raise OrderConflict(
            f"order id {order_id!r} of {where} is taken by another purchase "
            f"(user {order.user!r}, qty {order.qty}, {order.state}): "
            "a retry must repeat the same user and qty",
            name=name,
            reservation=order,
        )
    try:
        figures = [int(x) for x in raw[1:]]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"unexpected reply from an inventory script: {raw!r}") from exc
    if status == "soldout" and len(figures) == 2:
        available, requested = figures
        raise SoldOut(
            f"{where} is sold out: {available} available, {requested} requested",
            name=name,
            available=available,
            requested=requested,
        )
    if status == "limit" and len(figures) == 3:
        limit, already, requested = figures
        raise LimitExceeded(
            f"per-user limit of {where} exceeded: limit {limit}, the user already has "
            f"{already}, {requested} requested",
            name=name,
            limit=limit,
            already=already,
            requested=requested,
        )
    raise ValueError(f"unexpected reply from an inventory script: {raw!r}")


def decode_reserve(
    raw: Any,
    name: str | bytes,
    order_id: str,
    user: str,
    qty: int,
    hold_ms: int,
    encoding: tuple[str, str] = UTF8,
) -> Reservation:
    """Decode the reply of reserve: the order, or the refusal raised.

    A new reservation is answered with the server's time alone (an integer, ms): its deadline
    is that time plus ``hold_ms``, and the rest is what was asked for, so the script need not
    send it back (the cheapest reply to read). Any other reply is :func:`decode_reply`'s.
    """
    if isinstance(raw, int):
        return Reservation(
            order_id=order_id,
            user=user,
            qty=qty,
            state="reserved",
            expires_at=(raw + hold_ms) / 1000,
            expires_in=hold_ms / 1000,
            changed=True,
        )
    reservation = decode_reply(raw, name, order_id, encoding)
    if reservation is None:  # the reserve script never answers "missing"
        raise ValueError(f"unexpected reply from inventory_reserve.lua: {raw!r}")
    return reservation


def not_found(name: str | bytes, order_id: str) -> OrderNotFound:
    """The error of ``confirm`` / ``cancel`` of an order id never reserved."""
    return OrderNotFound(
        f"inventory {name!r} has no order {order_id!r}", name=name, order_id=order_id
    )


# -- commands -------------------------------------------------------------------------------
def _bulk(part: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(part), part)


def pack_head(script: Script, keys: Sequence[bytes], nargs: int) -> bytes:
    """The start of ``EVALSHA <script> <len(keys)> <keys> <nargs args>`` in the Redis protocol:
    the same for every call of one script on one inventory, so it is packed once; :func:`pack`
    appends the arguments."""
    parts = [b"EVALSHA", script.sha.encode(), b"%d" % len(keys), *keys]
    return b"*%d\r\n" % (len(parts) + nargs) + b"".join(map(_bulk, parts))


def pack(head: bytes, args: Sequence[bytes]) -> list[bytes]:
    """The whole command: ``head`` (:func:`pack_head`, for ``len(args)`` arguments) and the
    arguments, as one chunk for ``send_packed_command``."""
    return [head + b"".join(map(_bulk, args))]


# -- scripts --------------------------------------------------------------------------------
_LIB = ("common_lib", "inventory_lib")
RESERVE = load("inventory_reserve", prelude=_LIB)
CONFIRM = load("inventory_confirm", prelude=_LIB)
CANCEL = load("inventory_cancel", prelude=_LIB)
RESTOCK = load("inventory_restock", prelude=_LIB)
WITHDRAW = load("inventory_withdraw", prelude=_LIB)
SNAPSHOT = load("inventory_snapshot", prelude=_LIB)
ORDER = load("inventory_order", prelude=_LIB)
SCRIPTS: tuple[Script, ...] = (RESERVE, CONFIRM, CANCEL, RESTOCK, WITHDRAW, SNAPSHOT, ORDER)
