"""The flash-sale service under load: uvicorn on loopback, a few thousand concurrent buys.

    .venv/bin/pip install uvicorn httpx
    .venv/bin/pytest examples/flash_sale_service

The service runs in its own process (``python -m uvicorn``) on a socket bound here to a free
port of 127.0.0.1, against a private Redis server (:class:`redlease.server.RedisServer`), and
is always stopped. Skipped when uvicorn or httpx is not installed. No timing is asserted.
"""

from __future__ import annotations

import asyncio
import os
import random
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import redlease
from redlease.server import RedisServer, ServerNotFound

uvicorn = pytest.importorskip("uvicorn", reason="needs uvicorn: pip install uvicorn httpx")
httpx = pytest.importorskip("httpx", reason="needs httpx: pip install uvicorn httpx")

pytestmark = pytest.mark.timeout(180)

HERE = Path(__file__).resolve().parent
SKU = "sku:flash"
STOCK = 300
BUYERS = 1500  # each sends one purchase; some click twice, some retry the same order
DOUBLE_CLICKS = 300  # buyers who send a second purchase (another order id) at the same time
RETRIES = 200  # buyers who send the same order twice (a retry after a timeout)
HAMMER = 30  # requests at once from one buyer, first: the rate limiter refuses most (429)
CONCURRENCY = 16  # requests in flight at most (httpx slows down with more)
FAIL_PAYMENTS = 0.1
RATE_PER_USER = 5


# uvicorn on the socket bound here (`uvicorn --fd` would take it for a Unix socket, and
# asyncio then leaves Nagle's algorithm on: 40 ms stalls on every response).
LAUNCH = """\
import socket, sys, uvicorn
sock = socket.socket(fileno=int(sys.argv[1]))
sys.path.insert(0, sys.argv[2])
config = uvicorn.Config("service:app", log_level="warning", access_log=False)
uvicorn.Server(config).run(sockets=[sock])
"""


@pytest.fixture(scope="module")
def redis_server() -> Iterator[RedisServer]:
    """A private Redis server for this module."""
    try:
        server = RedisServer().start()
    except ServerNotFound as exc:
        pytest.skip(str(exc))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def service(redis_server: RedisServer) -> Iterator[str]:
    """The service in a uvicorn process on a free loopback port; its base URL."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    env = {
        **os.environ,
        "REDIS_URL": redis_server.url,
        "SKU": SKU,
        "LIMIT_PER_USER": "1",
        "RATE_PER_USER": str(RATE_PER_USER),
        "FAIL_PAYMENTS": str(FAIL_PAYMENTS),
    }
    command = [sys.executable, "-c", LAUNCH, str(listener.fileno()), str(HERE)]
    proc = subprocess.Popen(
        command,
        env=env,
        pass_fds=[listener.fileno()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    listener.close()  # the child has its own copy
    base = f"http://127.0.0.1:{port}"
    try:
        _wait_until_up(base, proc)
        yield base
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)
        if proc.stdout is not None:
            proc.stdout.close()


def _wait_until_up(base: str, proc: subprocess.Popen[bytes], limit: float = 30.0) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            output = proc.stdout.read().decode(errors="replace") if proc.stdout else ""
            pytest.fail(f"the service exited with {proc.returncode}:\n{output}")
        try:
            if httpx.get(base + "/stock", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    pytest.fail(f"the service did not answer within {limit:g} s")


def _requests() -> list[dict[str, Any]]:
    """Every purchase to send, shuffled (with a fixed seed): buyers, double clicks, retries
    of the same order and one buyer hammering the service."""
    bodies = [{"user": f"b{n}", "order_id": f"b{n}-1"} for n in range(BUYERS)]
    bodies += [{"user": f"b{n}", "order_id": f"b{n}-2"} for n in range(DOUBLE_CLICKS)]
    bodies += [{"user": f"b{n}", "order_id": f"b{n}-1"} for n in range(BUYERS - RETRIES, BUYERS)]
    random.Random(7).shuffle(bodies)
    return [{"user": "hammer", "order_id": f"hammer-{n}"} for n in range(HAMMER)] + bodies


async def _fire(base: str, bodies: list[dict[str, Any]]) -> list[tuple[dict[str, Any], Any]]:
    gate = asyncio.Semaphore(CONCURRENCY)
    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30.0) as http:

        async def buy(body: dict[str, Any]) -> tuple[dict[str, Any], Any]:
            async with gate:
                return body, await http.post("/buy", json=body)

        return await asyncio.gather(*(buy(body) for body in bodies))


def test_concurrent_buys_never_oversell_and_every_order_is_accounted_for(
    service: str, redis_server: RedisServer
) -> None:
    client = redis_server.client()
    client.flushall()
    inventory = redlease.Inventory(client, SKU)
    inventory.restock(STOCK)
    bodies = _requests()
    assert len(bodies) > 2000

    answers = asyncio.run(_fire(service, bodies))

    statuses = Counter(response.status_code for _, response in answers)
    assert set(statuses) <= {200, 201, 402, 403, 409, 429}, statuses
    assert statuses[201] > 0 and statuses[402] > 0 and statuses[429] > 0
    # Accepted orders: 201 (sold by this request) or 200 (the same order, sold, asked again).
    accepted = {
        body["order_id"] for body, response in answers if response.status_code in (200, 201)
    }
    assert statuses[201] == len(accepted)  # each order was sold by exactly one request
    stock = inventory.snapshot()
    assert stock.sold == len(accepted) <= STOCK  # nothing oversold, every sale counted
    assert stock.available + stock.reserved + stock.sold == stock.total == STOCK
    assert stock.reserved == 0  # every reservation was confirmed or cancelled
    assert stock.sold == STOCK  # far more buyers than units: everything was sold
    orders = [inventory.order(order_id) for order_id in accepted]
    assert all(order is not None and order.state == "sold" for order in orders)
    buyers = Counter(order.user for order in orders if order is not None)
    assert max(buyers.values()) == 1  # the per-user limit held
    for body, response in answers:
        if response.status_code == 402:  # payment failed: the units went back on sale
            order = inventory.order(body["order_id"])
            assert order is not None and order.state == "cancelled"
        if response.status_code == 429:
            assert int(response.headers["retry-after"]) >= 1
    assert sum(1 for body, _ in answers if body["user"] == "hammer") == HAMMER
    assert httpx.get(service + "/stock").json() == {
        "available": 0,
        "reserved": 0,
        "sold": STOCK,
        "total": STOCK,
    }
    client.close()


def test_bad_requests_are_refused_with_400(service: str) -> None:
    for body in ({}, {"user": ""}, {"user": "a b"}, {"user": "a", "qty": 0}, [1]):
        assert httpx.post(service + "/buy", json=body).status_code == 400
    assert httpx.post(service + "/buy", content=b"{not json").status_code == 400
    assert httpx.get(service + "/buy").status_code == 405
    assert httpx.get(service + "/nowhere").status_code == 404
