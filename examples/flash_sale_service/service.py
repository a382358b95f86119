"""A flash-sale HTTP service on redlease: ``POST /buy`` and ``GET /stock``, plain ASGI.

Run it (any ASGI server; uvicorn here), against a Redis server of yours::

    pip install uvicorn
    REDIS_URL=redis://127.0.0.1:6379 uvicorn service:app --app-dir examples/flash_sale_service

and put stock on sale with the library itself::

    python -c "import redis, redlease; redlease.Inventory(redis.Redis(), 'sku:1').restock(100)"

``POST /buy`` with ``{"user": "alice", "order_id": "a-7f3c", "qty": 1}`` (``order_id`` is the
client's idempotency key, optional; ``qty`` defaults to 1):

1. the buyer's rate limit (:class:`redlease.asyncio.RateLimiter`, per user): 429 when spent;
2. ``Inventory.reserve``: one script checks the buyer's limit and the stock and holds the
   units (403 over the limit, 409 sold out); no lock, no retry loop;
3. the payment (:func:`pay`, simulated): on success ``confirm`` sells the units (201), on
   failure ``cancel`` puts them back on sale at once (402).

Sending the same ``order_id`` again (a client retrying after a timeout) never buys twice: it
answers 200 with the order as it stands, finishing the purchase if the first request died
between reserve and confirm. ``GET /stock`` answers the counts ``available``, ``reserved``,
``sold`` and ``total``. A Redis failure answers 503.

Settings (environment): ``REDIS_URL`` (default ``redis://127.0.0.1:6379``), ``SKU``
(``sku:1``), ``LIMIT_PER_USER`` (1 unit), ``RATE_PER_USER`` (5 requests per second) and
``FAIL_PAYMENTS`` (share of payments that fail, default 0: for demonstrations and tests).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import redis.asyncio

import redlease.asyncio

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

HOLD = 30.0  # seconds a reservation waits for its payment before its units return to stock
MAX_BODY = 4096  # bytes
MAX_QTY = 10
_ID = re.compile(r"[A-Za-z0-9_.:@-]{1,64}")


@dataclass(frozen=True)
class Settings:
    """What the service needs to know; :meth:`from_env` reads the environment."""

    redis_url: str = "redis://127.0.0.1:6379"
    sku: str = "sku:1"
    limit_per_user: int = 1
    rate_per_user: int = 5
    fail_payments: float = 0.0

    @classmethod
    def from_env(cls) -> Settings:
        """Settings from ``REDIS_URL``, ``SKU``, ``LIMIT_PER_USER``, ``RATE_PER_USER`` and
        ``FAIL_PAYMENTS``; the defaults for those not set."""
        env = os.environ
        return cls(
            redis_url=env.get("REDIS_URL", cls.redis_url),
            sku=env.get("SKU", cls.sku),
            limit_per_user=int(env.get("LIMIT_PER_USER", cls.limit_per_user)),
            rate_per_user=int(env.get("RATE_PER_USER", cls.rate_per_user)),
            fail_payments=float(env.get("FAIL_PAYMENTS", cls.fail_payments)),
        )


class HTTPError(Exception):
    """An answer other than success: status, JSON body, extra headers."""

    def __init__(
        self, status: int, body: dict[str, Any], headers: list[tuple[str, str]] | None = None
    ) -> None:
        """Answer ``status`` with JSON ``body`` and ``headers`` (lower-case names)."""
        super().__init__(body.get("error", status))
        self.status, self.body, self.headers = status, body, headers or []


class FlashSale:
    """The ASGI application: one Redis client, one inventory, one rate limiter."""

    def __init__(self, settings: Settings) -> None:
        """Describe the service; it connects on the first request (or at lifespan start)."""
        self.settings = settings
        self._client: redis.asyncio.Redis | None = None
        self._inventory: redlease.asyncio.Inventory | None = None
        self._limiter: redlease.asyncio.RateLimiter | None = None

    # -- ASGI ---------------------------------------------------------------------------------
    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection: lifespan events, or an HTTP request."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
        elif scope["type"] == "http":
            try:
                status, body, headers = await self._route(scope, receive)
            except HTTPError as exc:
                status, body, headers = exc.status, exc.body, exc.headers
            except (redlease.InventoryUnavailable, redlease.RateLimitUnavailable):
                status, body, headers = 503, {"error": "storage unavailable, retry later"}, []
            await _respond(send, status, body, headers)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                self._connect()
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self._client is not None:
                    await self._client.aclose()
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _connect(self) -> None:
        if self._client is None:
            s = self.settings
            self._client = redis.asyncio.Redis.from_url(s.redis_url, socket_timeout=5.0)
            self._inventory = redlease.asyncio.Inventory(self._client, s.sku)
            self._limiter = redlease.asyncio.RateLimiter(
                self._client, "buy", limit=s.rate_per_user, window=1.0
            )

    async def _route(
        self, scope: Scope, receive: Receive
    ) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        self._connect()
        method, path = scope["method"], scope["path"]
        if path == "/buy":
            if method != "POST":
                raise HTTPError(405, {"error": "use POST"}, [("allow", "POST")])
            return await self.buy(await _json_body(receive))
        if path == "/stock":
            if method not in ("GET", "HEAD"):
                raise HTTPError(405, {"error": "use GET"}, [("allow", "GET, HEAD")])
            return 200, await self.stock(), []
        raise HTTPError(404, {"error": "not found"})

    # -- the endpoints --------------------------------------------------------------------------
    async def stock(self) -> dict[str, int]:
        """``GET /stock``: the inventory's counts, read atomically."""
        assert self._inventory is not None
        snapshot = await self._inventory.snapshot()
        return {
            "available": snapshot.available,
            "reserved": snapshot.reserved,
            "sold": snapshot.sold,
            "total": snapshot.total,
        }

    async def buy(
        self, request: dict[str, Any]
    ) -> tuple[int, dict[str, Any], list[tuple[str, str]]]:
        """``POST /buy``: rate limit, reserve, pay, then confirm or cancel."""
        assert self._inventory is not None and self._limiter is not None
        user, order_id, qty = _purchase(request)
        verdict = await self._limiter.hit(user)
        if not verdict.allowed:
            retry = str(max(1, math.ceil(verdict.retry_after)))
            raise HTTPError(429, {"error": "too many requests"}, [("retry-after", retry)])
        try:
            order = await self._inventory.reserve(
                user=user,
                order_id=order_id,
                qty=qty,
                hold=HOLD,
                per_user_limit=self.settings.limit_per_user,
            )
        except redlease.SoldOut as exc:
            raise HTTPError(409, {"error": "sold out", "available": exc.available}) from None
        except redlease.LimitExceeded as exc:
            body = {"error": "limit per user reached", "limit": exc.limit, "already": exc.already}
            raise HTTPError(403, body) from None
        except redlease.OrderConflict:
            raise HTTPError(409, {"error": "order_id belongs to another purchase"}) from None
        if order.state == "reserved":  # new, or a retry of a request that died before paying
            if await pay(order.order_id, order.user, order.qty, self.settings.fail_payments):
                order = await self._confirm(order.order_id)
            else:
                await self._inventory.cancel(order.order_id)
                raise HTTPError(402, {"error": "payment failed", "order_id": order_id})
        body = {"order_id": order.order_id, "user": order.user, "qty": order.qty}
        if order.state != "sold":  # a retry of a purchase that was cancelled or expired
            raise HTTPError(409, {**body, "error": f"order {order.state}", "state": order.state})
        return (201 if order.changed else 200), {**body, "state": "sold"}, []

    async def _confirm(self, order_id: str) -> redlease.Reservation:
        assert self._inventory is not None
        try:
            return await self._inventory.confirm(order_id)
        except redlease.OrderClosed as exc:  # the hold ran out while paying: refund here
            raise HTTPError(409, {"error": f"order {exc.state}", "order_id": order_id}) from None


async def pay(order_id: str, user: str, qty: int, fail_share: float) -> bool:
    """Charge the buyer (simulated): ``False`` for a share ``fail_share`` of the orders.

    The answer depends on the order id only, so a retried order gets the same answer, as a
    payment provider called with the order id as its idempotency key would give.
    """
    digest = hashlib.blake2b(order_id.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 >= fail_share


def _purchase(request: dict[str, Any]) -> tuple[str, str, int]:
    """``(user, order_id, qty)`` of a request body, or a 400 naming what is wrong."""
    user, order_id, qty = request.get("user"), request.get("order_id"), request.get("qty", 1)
    if not isinstance(user, str) or not _ID.fullmatch(user):
        raise HTTPError(400, {"error": "user: 1-64 characters of A-Z a-z 0-9 _ . : @ -"})
    if order_id is None:
        order_id = secrets.token_hex(8)
    elif not isinstance(order_id, str) or not _ID.fullmatch(order_id):
        raise HTTPError(400, {"error": "order_id: 1-64 characters of A-Z a-z 0-9 _ . : @ -"})
    if isinstance(qty, bool) or not isinstance(qty, int) or not 1 <= qty <= MAX_QTY:
        raise HTTPError(400, {"error": f"qty: an integer from 1 to {MAX_QTY}"})
    return user, order_id, qty


async def _json_body(receive: Receive) -> dict[str, Any]:
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise HTTPError(400, {"error": "client went away"})
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            raise HTTPError(413, {"error": f"body larger than {MAX_BODY} bytes"})
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    try:
        request = json.loads(b"".join(chunks) or b"{}")
    except ValueError:
        raise HTTPError(400, {"error": "body: not JSON"}) from None
    if not isinstance(request, dict):
        raise HTTPError(400, {"error": "body: a JSON object expected"})
    return request


async def _respond(
    send: Send, status: int, body: dict[str, Any], headers: list[tuple[str, str]]
) -> None:
    payload = json.dumps(body).encode()
    raw_headers = [
        (b"content-type", b"application/json"),
        (b"content-length", b"%d" % len(payload)),
    ]
    raw_headers += [(name.encode(), value.encode()) for name, value in headers]
    await send({"type": "http.response.start", "status": status, "headers": raw_headers})
    await send({"type": "http.response.body", "body": payload})


app = FlashSale(Settings.from_env())
"""The application, configured from the environment (``uvicorn service:app``)."""
