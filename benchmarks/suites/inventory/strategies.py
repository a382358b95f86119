"""One reservation of each strategy (a coroutine function per strategy, run by the buyers),
and the keys the benchmark writes."""

from __future__ import annotations

import hashlib
from typing import Any

STRATEGIES = ("floor", "seed", "seed-lean", "script", "atomic", "lock", "watch")
SEED = """\
local stock = tonumber(redis.call('GET', KEYS[1]) or '0')
local qty = tonumber(ARGV[1])
if stock < qty then return -1 end
return redis.call('DECRBY', KEYS[1], qty)
"""
"""The minimal reservation: take ``qty`` units from a plain counter if there are enough."""
SEED_SHA = hashlib.sha1(SEED.encode()).hexdigest()
STOCK = 10**9  # never sold out


def keys(run: str) -> dict[str, str]:
    """Names of the benchmark's keys (unique to the run)."""
    return {
        "stock": f"bench:{run}:stock",
        "lock": f"bench:{run}:lock",
        "inventory": f"bench:{run}",
    }


def operation(name: str, client: Any, run: str, index: int, sha: str) -> Any:
    """The coroutine function ``op(task, n) -> retries`` that takes one unit, for ``name``."""
    import redis.exceptions

    import redlease.asyncio

    k = keys(run)
    if name == "floor":

        async def floor(task: int, n: int) -> int:
            await client.evalsha(sha, 0)
            return 0

        return floor
    if name == "seed":

        async def seed(task: int, n: int) -> int:
            assert await client.evalsha(SEED_SHA, 1, k["stock"], 1) >= 0
            return 0

        return seed
    if name == "seed-lean":
        from redlease._async.runtime import runtime_for
        from redlease._core.scripts import Script

        backend = runtime_for(client).backend
        script = Script("seed", SEED, SEED_SHA)
        stock = [k["stock"].encode()]

        async def seed_lean(task: int, n: int) -> int:
            assert await backend.run(script, stock, [1]) >= 0
            return 0

        return seed_lean
    if name == "script":
        from redlease._core.inventory import RESERVE, InventoryKeys

        names = InventoryKeys.build("redlease", k["inventory"].encode()).all

        async def script(task: int, n: int) -> int:
            buyer = f"{index}.{task}.{n}"
            reply = await client.evalsha(
                RESERVE.sha, len(names), *names, buyer, buyer, 1, 300_000, 1, 0
            )
            assert isinstance(reply, int), reply
            return 0

        return script
    if name == "atomic":
        inventory = redlease.asyncio.Inventory(client, k["inventory"])

        async def atomic(task: int, n: int) -> int:
            buyer = f"{index}.{task}.{n}"
            await inventory.reserve(user=buyer, order_id=buyer, hold=300.0, per_user_limit=1)
            return 0

        return atomic
    if name == "lock":
        lock = redlease.asyncio.Lock(client, k["lock"], ttl=5.0, timeout=30.0)

        async def locked(task: int, n: int) -> int:
            async with lock:
                stock = int(await client.get(k["stock"]))
                await client.set(k["stock"], stock - 1)
            return 0

        return locked
    if name == "watch":

        async def watch(task: int, n: int) -> int:
            retries = 0
            async with client.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        await pipe.watch(k["stock"])
                        stock = int(await pipe.get(k["stock"]))
                        pipe.multi()
                        pipe.set(k["stock"], stock - 1)
                        await pipe.execute()
                        return retries
                    except redis.exceptions.WatchError:
                        retries += 1

        return watch
    raise ValueError(name)


def all_keys(run: str) -> list[bytes]:
    """Every key the benchmark writes (redlease's default prefix)."""
    from redlease._core.inventory import InventoryKeys
    from redlease._core.lock import LockKeys

    k = keys(run)
    lock = LockKeys.build("redlease", k["lock"].encode())
    inventory = InventoryKeys.build("redlease", k["inventory"].encode())
    return [k["stock"].encode(), lock.lock, lock.fence, lock.queue, lock.handoff, *inventory.all]


def reset(client: Any, run: str) -> None:
    """Fresh keys before a measurement: a full stock, no orders, no lock."""
    import redlease

    client.unlink(*all_keys(run))
    client.set(keys(run)["stock"], STOCK)
    redlease.Inventory(client, keys(run)["inventory"]).restock(STOCK)
