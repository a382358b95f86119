"""Leases that move: ``lock.detach()`` and ``Lock.adopt(client, token)`` (asyncio; the sync
twin is generated), on one server (tests/_async/test_handover_cluster.py: on a Cluster)."""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
import sys
from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core import handover
from redlease._core.lock import LockKeys
from redlease._core.scripts import Script
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str | bytes) -> LockKeys:
    return LockKeys.build("redlease", name if isinstance(name, bytes) else name.encode())


async def test_detach_hands_the_lease_to_adopt(async_client: redis.asyncio.Redis) -> None:
    lock = redlease.Lock(async_client, "hand", ttl=5.0)
    assert await lock.acquire()
    fence = lock.fence
    token = await lock.detach()
    assert isinstance(token, str) and json.loads(json.dumps(token)) == token
    # The lease runs on in Redis, but this handle neither owns nor renews it any more.
    assert await async_client.get(keys("hand").lock) is not None
    assert lock.fence is None and not await lock.owned()
    with pytest.raises(redlease.LockNotOwned):
        await lock.release()
    adopted = await redlease.Lock.adopt(async_client, token)
    assert adopted.fence == fence and adopted.ttl == 5.0 and await adopted.owned()
    await adopted.release()
    assert await async_client.exists(keys("hand").lock) == 0
    # The handle that detached is free again: a new acquisition, a larger fence.
    assert await lock.acquire(timeout=0)
    assert (lock.fence or 0) > (fence or 0)
    await lock.release()


async def test_an_adopted_lease_is_set_to_its_ttl_and_renewed(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "renewed", ttl=30.0)
    assert await lock.acquire()
    adopted = await redlease.Lock.adopt(async_client, await lock.detach(), ttl=0.3)
    assert 0 < await async_client.pttl(keys("renewed").lock) <= 300
    await AsyncTasks.sleep(1.0)  # three leases: only the watchdog keeps it
    assert await adopted.owned()
    await adopted.release()


async def test_a_detached_lease_nobody_adopts_runs_out_within_its_ttl(
    async_client: redis.asyncio.Redis,
) -> None:
    orphan = redlease.Lock(async_client, "orphan", ttl=0.3)
    kept = redlease.Lock(async_client, "kept", ttl=0.3)  # the twin: still held, renewed
    assert await orphan.acquire() and await kept.acquire()
    token = await orphan.detach()
    await AsyncTasks.sleep(1.0)
    assert await async_client.exists(keys("orphan").lock) == 0
    assert await async_client.exists(keys("kept").lock) == 1
    with pytest.raises(redlease.LockLost, match="could not be adopted"):
        await redlease.Lock.adopt(async_client, token)
    await kept.release()


async def test_adopting_a_lease_another_took_raises_lock_lost(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "taken", ttl=0.2)
    assert await lock.acquire()
    token = await lock.detach()
    other = redlease.Lock(async_client, "taken", ttl=30.0)
    assert await other.acquire(timeout=5)  # once the detached lease ran out
    with pytest.raises(redlease.LockLost):
        await redlease.Lock.adopt(async_client, token, ttl=1.0)
    # The new holder's lease was not touched (not set to the adopter's 1 s).
    assert await async_client.pttl(keys("taken").lock) > 20_000
    assert await other.owned()
    await other.release()


def non_exclusive(monkeypatch: pytest.MonkeyPatch) -> None:
    """The bug, for the twins: adopt.lua also lets in an adopter of a token already adopted
    (as the extend-based adoption did: any holder of the token was let in)."""
    check = "if holder == detached then"
    assert check in handover.ADOPT.source
    source = handover.ADOPT.source.replace(
        check,
        "local spent = redis.call('GET', adopted) or ''\n"
        "if holder == detached or (holder and spent == detached .. ' ' .. holder) then",
    )
    twin = Script("adopt", source, hashlib.sha1(source.encode()).hexdigest())
    monkeypatch.setattr(handover, "ADOPT", twin)


@pytest.mark.parametrize("exclusive", [True, False], ids=["adopt-once", "twin-non-exclusive"])
async def test_a_token_is_adopted_once(
    async_client: redis.asyncio.Redis, monkeypatch: pytest.MonkeyPatch, exclusive: bool
) -> None:
    """A second adopter of one token (a redelivered message) is refused while the first holds
    the lease; the twin, with the old non-exclusive adoption, lets it in beside the first."""
    if not exclusive:
        non_exclusive(monkeypatch)
    lock = redlease.Lock(async_client, "once", ttl=30.0)
    assert await lock.acquire()
    token = await lock.detach()
    first = await redlease.Lock.adopt(async_client, token, ttl=5.0)
    second: redlease.Lock | None = None
    try:
        second = await redlease.Lock.adopt(async_client, token, ttl=5.0)
    except redlease.AlreadyAdopted as exc:
        assert "already adopted" in str(exc) and 0 < exc.remaining <= 5.0
        assert isinstance(exc, redlease.LockError) and exc.name == "once"
    if exclusive:
        assert second is None and await first.owned()
        await first.release()
    else:
        assert second is not None and await second.owned()  # both adopted: the bug
        assert not await first.owned()
        await second.release()


async def test_a_spent_token_is_refused_and_the_lock_is_free_after_its_adopter(
    async_client: redis.asyncio.Redis,
) -> None:
    """When the adopter is done (released; or died: its short lease ran out, unrenewed), the
    spent token adopts nothing (LockLost, naming the earlier adoption); the lock is free."""
    for ended in ("released", "died"):
        name = f"spent-{ended}"
        lock = redlease.Lock(async_client, name, ttl=30.0)
        assert await lock.acquire()
        token = await lock.detach()
        adopter = await redlease.Lock.adopt(async_client, token, ttl=0.3, renew=False)
        if ended == "released":
            await adopter.release()
        else:
            await AsyncTasks.sleep(1.0)  # three of its leases, nobody renewing
        with pytest.raises(redlease.LockLost, match="adopted before"):
            await redlease.Lock.adopt(async_client, token)
        assert await lock.acquire(timeout=0)  # free: taken at once
        await lock.release()


async def test_the_spent_token_record_expires_with_the_detached_lease(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "record", ttl=3.0)
    assert await lock.acquire()
    adopted = await redlease.Lock.adopt(async_client, await lock.detach(), ttl=1.0)
    left = await async_client.pttl(b"redlease:{record}:adopted")
    assert 0 < left <= 3000  # what the detached lease had left: never kept for good
    await adopted.release()


def forged(token: str, **changes: Any) -> str:
    """``token`` with its JSON fields changed (as a user who edits it would)."""
    body = token[len(handover.PREFIX) :]
    fields = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    fields.update(changes)
    data = base64.urlsafe_b64encode(json.dumps(fields).encode()).rstrip(b"=").decode()
    return handover.PREFIX + data


async def test_the_fence_comes_from_the_server_not_the_token(
    async_client: redis.asyncio.Redis,
) -> None:
    """A token edited to a higher fence is adopted with the fence the server issued, so the
    next legitimate holder's fenced write is accepted. The twin below shows the check: had
    the adopter written with the forged fence, the next holder would be refused."""
    lock = redlease.Lock(async_client, "forged", ttl=5.0)
    assert await lock.acquire()
    fence = lock.fence or 0
    high = fence + 10**12
    adopted = await redlease.Lock.adopt(async_client, forged(await lock.detach(), fence=high))
    assert adopted.fence == fence
    store = redlease.FencedStore(async_client, "data")
    twin = redlease.FencedStore(async_client, "data-twin")  # as if the token were trusted
    await store.write(adopted.fence, "the adopter's write")
    await twin.write(high, "the adopter's write")
    await adopted.release()
    async with redlease.Lock(async_client, "forged", ttl=5.0) as held:  # the next holder
        assert held.fence > fence
        await store.write(held.fence, "the next holder's write")
        with pytest.raises(redlease.StaleFence):
            await twin.write(held.fence, "the next holder's write")


async def test_with_enters_an_adopted_lock_and_releases_it(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "within", ttl=5.0)
    assert await lock.acquire()
    fence = lock.fence
    token = await lock.detach()
    async with await redlease.Lock.adopt(async_client, token) as held:
        assert held.fence == fence  # entered, not acquired again
        assert await async_client.exists(keys("within").lock) == 1
    assert await async_client.exists(keys("within").lock) == 0
    async with held.lock as again:  # the next ``with`` acquires as usual
        assert again.fence > fence


async def test_an_rlock_hands_over_its_lease_once(async_client: redis.asyncio.Redis) -> None:
    name = b"\xffbytes"
    lock = redlease.RLock(async_client, name, ttl=5.0)
    assert await lock.acquire() and await lock.acquire()  # re-entered: given up together
    token = await lock.detach()
    adopted = await redlease.RLock.adopt(async_client, token)
    assert adopted.name == name
    with pytest.raises(redlease.AlreadyAdopted, match="already adopted"):
        await redlease.RLock.adopt(async_client, token)  # adopted once, RLock too
    assert await adopted.acquire()  # the adopter may re-enter
    await adopted.release()
    assert await adopted.owned()
    await adopted.release()
    assert await async_client.exists(keys(name).lock) == 0


async def test_an_rlock_also_held_through_another_object_is_not_detached(
    async_client: redis.asyncio.Redis,
) -> None:
    first = redlease.RLock(async_client, "two-objects", ttl=5.0)
    second = redlease.RLock(async_client, "two-objects", ttl=5.0)
    assert await first.acquire() and await second.acquire()  # one holding, re-entered
    with pytest.raises(RuntimeError, match="another RLock"):
        await first.detach()
    await second.release()
    adopted = await redlease.RLock.adopt(async_client, await first.detach())
    await adopted.release()
    assert await async_client.exists(keys("two-objects").lock) == 0


async def test_detach_of_a_handle_holding_nothing_raises_not_owned(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "empty")
    with pytest.raises(redlease.LockNotOwned, match="detach"):
        await lock.detach()


@pytest.mark.parametrize(
    ("token", "error", "match"),
    [
        (b"redlease1.e30", TypeError, "token must be a str"),
        ("nonsense", ValueError, "token is not a redlease hand-over token"),
        ("redlease1.!!!", ValueError, "token is malformed"),
        ("redlease1.e30", ValueError, "token is malformed"),  # {}
        (
            handover.encode(handover.Handover("redlock", "redlease", "x", b"a.b", 1, 1000)),
            ValueError,
            "token holds a Redlock's lease",
        ),
    ],
)
async def test_a_bad_token_is_refused_before_anything_is_sent(
    async_client: redis.asyncio.Redis, token: Any, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await redlease.Lock.adopt(async_client, token)


def _adopt_elsewhere(client: Any, token: str) -> str:
    """Adopt ``token`` in a new Python process (sync API); what it printed."""
    if hasattr(client, "get_default_node"):
        node = client.get_default_node()
        kind, host, port = "cluster", node.host, node.port
    else:
        kwargs = client.connection_pool.connection_kwargs
        kind, host, port = "server", kwargs["host"], kwargs["port"]
    script = (
        "import sys, redis, redis.cluster, redlease\n"
        "kind, host, port, token = sys.argv[1:]\n"
        "r = (redis.cluster.RedisCluster if kind == 'cluster' else redis.Redis)"
        "(host=host, port=int(port))\n"
        "lock = redlease.Lock.adopt(r, token, ttl=5.0)\n"
        "print(lock.fence, lock.owned())\n"
        "lock.release()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, kind, host, str(port), token],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


async def test_a_lease_is_adopted_and_released_in_another_process(
    async_client: redis.asyncio.Redis,
) -> None:
    lock = redlease.Lock(async_client, "elsewhere", ttl=5.0)
    assert await lock.acquire()
    fence = lock.fence
    token = await lock.detach()
    seen = await AsyncTasks.blocking(lambda: _adopt_elsewhere(async_client, token))
    assert seen == f"{fence} True"
    assert await async_client.exists(keys("elsewhere").lock) == 0
