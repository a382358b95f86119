"""The buyers of the flash-sale demo: four ways to sell one unit, and the process running them.

Every strategy answers ``take(user, order_id)`` with :data:`TAKEN`, :data:`SOLD_OUT` or
:data:`OVER_LIMIT`, then, after the (simulated) payment, ``confirm`` or ``give_back``:

``naive``   GET the stock and the buyer's count, check them, wait ``gap`` (the buyer's own code
            between its read and its write), SET both. Buyers who read the same stock all
            sell "the last unit": it oversells, and lets one buyer pass the limit twice.
``watch``   the same reads and writes in WATCH / MULTI / EXEC, retried when another buyer
            committed first (each retry is counted).
``lock``    the naive code inside a :class:`redlease.asyncio.Lock`: one buyer at a time.
``atomic``  :meth:`redlease.asyncio.Inventory.reserve`: the check and the take run in one
            script on the server, one round trip, nothing to wait for or retry.
"""

from __future__ import annotations

import asyncio
import hashlib
import signal
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio
from redis.exceptions import WatchError

import redlease.asyncio

from ..._core.inventory import InventoryKeys
from ..._core.lock import LockKeys
from .._connection import make_async_client
from .crew import now_ns

__all__ = [
    "EXPLAINED",
    "OVER_LIMIT",
    "RETURNED",
    "SOLD",
    "SOLD_OUT",
    "STRATEGIES",
    "TAKEN",
    "Job",
    "Result",
    "SaleKeys",
    "buyer_process",
    "payment_fails",
]

STRATEGIES = ("naive", "watch", "lock", "atomic")
EXPLAINED = {
    "naive": "GET stock, check, SET stock-1: buyers who read the same stock all sell it",
    "watch": "WATCH/MULTI/EXEC: correct, but a transaction retries when another commits first",
    "lock": "redlease.Lock around GET/SET: any code fits in it, but one buyer at a time holds it",
    "atomic": "Inventory.reserve: check and take in one script, one round trip, no waiting",
}
"""One line per strategy, for the report."""

TAKEN, SOLD, SOLD_OUT, OVER_LIMIT, RETURNED = "taken", "sold", "sold out", "over limit", "returned"
"""Outcomes: a unit taken (before payment), sold (paid), refused (no stock, or the buyer is at
the limit), returned (the payment failed and the unit went back on sale)."""

LOCK_TTL = 5.0  # the lock's lease (seconds): only matters if a buyer process dies holding it
LOCK_WAIT = 60.0  # longest a buyer waits for the lock before the demo fails
HOLD = 60.0  # atomic: seconds a reservation holds its unit until paid (payment is instant here)
_GO_WAIT = 300.0  # longest a buyer process waits for the parent's go, before it gives up


@dataclass(frozen=True)
class SaleKeys:
    """The keys and names one strategy's sale uses (unique to the run)."""

    stock: str  # naive, watch, lock: STRING, units left
    users: str  # naive, watch, lock: HASH, buyer -> units bought
    lock: str  # lock: the redlease lock's name
    inventory: str  # atomic: the redlease inventory's name

    @classmethod
    def build(cls, prefix: str, run: str, strategy: str) -> SaleKeys:
        """The keys of ``strategy`` in run ``run``."""
        # One hash tag for stock and users: WATCH / MULTI on a Redis Cluster needs one slot.
        base = f"{prefix}:demo:{{{run}:{strategy}}}"
        name = f"demo:{run}:{strategy}"
        return cls(stock=f"{base}:stock", users=f"{base}:users", lock=name, inventory=name)

    def all_keys(self, prefix: str) -> list[bytes]:
        """Every Redis key the sale may leave behind, to delete at the end."""
        lock = LockKeys.build(prefix, self.lock.encode())
        inventory = InventoryKeys.build(prefix, self.inventory.encode())
        return [
            self.stock.encode(),
            self.users.encode(),
            lock.lock,
            lock.fence,
            lock.queue,
            lock.handoff,
            *inventory.all,
        ]


@dataclass(frozen=True)
class Job:
    """What one buyer process needs (picklable: sent to the spawned process)."""

    index: int
    url: str
    prefix: str
    run: str
    strategies: tuple[str, ...]
    users: tuple[str, ...]  # the buyers this process serves, in order
    clicks: int  # purchase attempts per buyer, taken up at once by different tasks
    concurrency: int  # buyers at once (asyncio tasks)
    limit: int  # units per buyer
    gap: float  # seconds between a buyer's read and write (naive, watch, lock)
    fail: float  # share of payments that fail
    seed: str

    def orders(self) -> Iterator[tuple[str, str]]:
        """``(user, order id)`` of every click, a buyer's clicks one after the other."""
        for user in self.users:
            for click in range(self.clicks):
                yield user, f"{user}.{click}"


@dataclass
class Result:
    """What one buyer process reports about one strategy."""

    outcomes: Counter[str] = field(default_factory=Counter)
    latencies: list[float] = field(default_factory=list)  # ms, one per click
    bought: Counter[str] = field(default_factory=Counter)  # buyer -> units sold to them
    retries: int = 0
    start_ns: int = 0
    end_ns: int = 0


def payment_fails(seed: str, order_id: str, share: float) -> bool:
    """Whether the payment of ``order_id`` fails: the same orders in every strategy."""
    if share <= 0:
        return False
    digest = hashlib.blake2b(f"{seed}:{order_id}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big") / 2**64 < share


# -- the strategies -----------------------------------------------------------------------------


class _Naive:
    """GET, check, SET: the read-modify-write every flash sale starts with."""

    def __init__(self, client: redis.asyncio.Redis, job: Job, keys: SaleKeys) -> None:
        self.client = client
        self.job = job
        self.keys = keys
        self.retries = 0

    async def take(self, user: str, order_id: str) -> str:
        """Take one unit for ``user``, or say why not."""
        return await self._change(self.client, user, -1)

    async def give_back(self, user: str, order_id: str) -> None:
        """Put the unit of a failed payment back on sale."""
        await self._change(self.client, user, +1)

    async def confirm(self, order_id: str) -> None:
        """The payment went through: the unit taken is sold (nothing more to write here)."""

    async def _change(self, conn: Any, user: str, delta: int) -> str:
        """Read stock and the user's count, check (when taking), write both changed by delta."""
        stock, have = await self._read(conn, user)
        if delta < 0:
            refusal = self._refusal(stock, have)
            if refusal is not None:
                return refusal
            await asyncio.sleep(self.job.gap)  # the buyer's code between its read and write
        await conn.set(self.keys.stock, stock + delta)
        await conn.hset(self.keys.users, user, have - delta)
        return TAKEN

    async def _read(self, conn: Any, user: str) -> tuple[int, int]:
        stock = int(await conn.get(self.keys.stock) or 0)
        have = int(await conn.hget(self.keys.users, user) or 0)
        return stock, have

    def _refusal(self, stock: int, have: int) -> str | None:
        if stock < 1:
            return SOLD_OUT
        if have >= self.job.limit:
            return OVER_LIMIT
        return None


class _Watch(_Naive):
    """The same reads and writes as a WATCH / MULTI / EXEC transaction, retried on conflict."""

    async def _change(self, conn: Any, user: str, delta: int) -> str:
        async with self.client.pipeline(transaction=True) as pipe:
            while True:
                try:
                    await pipe.watch(self.keys.stock, self.keys.users)
                    stock, have = await self._read(pipe, user)
                    if delta < 0:
                        refusal = self._refusal(stock, have)
                        if refusal is not None:
                            return refusal
                        await asyncio.sleep(self.job.gap)
                    pipe.multi()  # type: ignore[no-untyped-call]
                    pipe.set(self.keys.stock, stock + delta)
                    pipe.hset(self.keys.users, user, have - delta)
                    await pipe.execute()
                    return TAKEN
                except WatchError:  # another buyer committed in between: read again
                    self.retries += 1


class _Locked(_Naive):
    """The naive code, one buyer at a time: inside a redlease lock.

    The buyers of one process share one lock handle: they queue for it locally, and one at a
    time queues in Redis with the other processes.
    """

    def __init__(self, client: redis.asyncio.Redis, job: Job, keys: SaleKeys) -> None:
        super().__init__(client, job, keys)
        self.lock = redlease.asyncio.Lock(
            client, keys.lock, ttl=LOCK_TTL, timeout=LOCK_WAIT, prefix=job.prefix
        )

    async def _change(self, conn: Any, user: str, delta: int) -> str:
        async with self.lock:
            return await super()._change(conn, user, delta)


class _Atomic:
    """redlease's Inventory: reserve, then confirm (paid) or cancel (payment failed)."""

    def __init__(self, client: redis.asyncio.Redis, job: Job, keys: SaleKeys) -> None:
        self.inventory = redlease.asyncio.Inventory(client, keys.inventory, prefix=job.prefix)
        self.limit = job.limit
        self.retries = 0

    async def take(self, user: str, order_id: str) -> str:
        """Reserve one unit for ``user`` (one script: checks stock and limit, takes)."""
        try:
            await self.inventory.reserve(
                user=user, order_id=order_id, hold=HOLD, per_user_limit=self.limit
            )
        except redlease.SoldOut:
            return SOLD_OUT
        except redlease.LimitExceeded:
            return OVER_LIMIT
        return TAKEN

    async def give_back(self, user: str, order_id: str) -> None:
        """Cancel the reservation: its unit is available again."""
        await self.inventory.cancel(order_id)

    async def confirm(self, order_id: str) -> None:
        """Sell the reserved unit."""
        await self.inventory.confirm(order_id)


_KINDS: dict[str, Any] = {"naive": _Naive, "watch": _Watch, "lock": _Locked, "atomic": _Atomic}


# -- the buyer process ----------------------------------------------------------------------------


def buyer_process(job: Job, go: list[Any], progress: Any, messages: Any) -> None:
    """Entry point of one buyer process: run each strategy when the parent says go.

    Messages on ``messages``: ``("ready", i)``, ``("done", i, k, Result)`` after strategy
    ``k``, ``("error", i, text)``. ``progress[(k * processes + i) * 2]`` counts the clicks
    answered and ``[... + 1]`` the units sold, live.
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle
    try:
        asyncio.run(_serve(job, go, progress, messages))
    except Exception as exc:
        messages.put(("error", job.index, f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


async def _serve(job: Job, go: list[Any], progress: Any, messages: Any) -> None:
    client = make_async_client(job.url, connect_timeout=5.0, timeout=10.0)
    try:
        # Open the connections now (ours and redlease's pool), not during the first sale.
        warm = SaleKeys.build(job.prefix, job.run, "warm-up").inventory
        inventory = redlease.asyncio.Inventory(client, warm, prefix=job.prefix)
        await asyncio.gather(*(client.ping() for _ in range(job.concurrency)))
        await asyncio.gather(*(inventory.snapshot() for _ in range(job.concurrency)))
        messages.put(("ready", job.index))
        processes = len(progress) // (2 * len(job.strategies))
        for k, name in enumerate(job.strategies):
            if not await asyncio.to_thread(go[k].wait, _GO_WAIT):
                return
            keys = SaleKeys.build(job.prefix, job.run, name)
            strategy = _KINDS[name](client, job, keys)
            slot = (k * processes + job.index) * 2
            messages.put(("done", job.index, k, await _sell(job, strategy, progress, slot)))
    finally:
        await client.aclose()


async def _sell(job: Job, strategy: Any, progress: Any, slot: int) -> Result:
    """Serve every click of this process with ``job.concurrency`` buyers at once."""
    orders = job.orders()  # shared: each task takes the next click when it is free
    result = Result()

    async def buyer() -> None:
        for user, order_id in orders:
            started = time.perf_counter()
            outcome = await strategy.take(user, order_id)
            if outcome == TAKEN:
                if payment_fails(job.seed, order_id, job.fail):
                    await strategy.give_back(user, order_id)
                    outcome = RETURNED
                else:
                    await strategy.confirm(order_id)
                    outcome = SOLD
                    result.bought[user] += 1
            result.latencies.append((time.perf_counter() - started) * 1000)
            result.outcomes[outcome] += 1
            progress[slot] += 1
            if outcome == SOLD:
                progress[slot + 1] += 1

    result.start_ns = now_ns()
    await asyncio.gather(*(buyer() for _ in range(job.concurrency)))
    result.end_ns = now_ns()
    result.retries = strategy.retries
    return result
