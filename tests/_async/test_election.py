"""Election against a real server (asyncio; tests/_sync/test_election.py is generated)."""

from __future__ import annotations

from typing import Any

import pytest
import redis.asyncio

import redlease.asyncio as redlease
from redlease._core.election import election_keys
from redlease._core.shared import SharedKeys
from tests._async.helpers import wait_until
from tests.support import AsyncTasks

pytestmark = pytest.mark.timeout(60)


def keys(name: str) -> SharedKeys:
    return election_keys("redlease", name.encode())


async def test_campaign_lead_and_resign(async_client: redis.asyncio.Redis) -> None:
    election = redlease.Election(async_client, "sched", ttl=10.0)
    assert await election.leader() is None
    assert election.term is None
    assert await election.campaign("host-a")
    term = election.term
    assert term is not None and term > 0 and election.value == "host-a"
    assert await election.leader() == redlease.Leader("host-a", term)
    assert await election.leading()
    info = await election.inspect()
    assert info.leader == ("host-a", term) and info.mine and info.last_term == term
    assert info.remaining is not None and 0 < info.remaining <= 10.0
    with pytest.raises(RuntimeError, match="leads already"):
        await election.campaign("again")
    await election.resign()
    assert await election.leader() is None
    assert election.term is None
    with pytest.raises(redlease.NotLeader):
        await election.resign()


async def test_a_candidate_waits_and_terms_increase(async_client: redis.asyncio.Redis) -> None:
    first = redlease.Election(async_client, "terms", ttl=30.0)
    second = redlease.Election(async_client, "terms", ttl=30.0)
    terms: list[int] = []

    async def lead_first() -> None:
        assert await first.campaign("a")
        terms.append(first.term or 0)
        assert not await AsyncTasks.run(lambda: second.campaign("b", timeout=0))
        assert await wait_until(lambda: _candidates(first, 1))
        await first.resign()

    async def lead_second() -> None:
        assert await wait_until(lambda: _led(first))
        assert await second.campaign("b", timeout=20)  # woken, far before the 30 s lease
        terms.append(second.term or 0)
        assert await second.leader() == ("b", second.term)
        await second.resign()

    await AsyncTasks.gather(lead_first, lead_second)
    assert terms[0] < terms[1]


async def test_observe_yields_each_change(async_client: redis.asyncio.Redis) -> None:
    election = redlease.Election(async_client, "watched", ttl=30.0)
    seen: list[Any] = []
    election_term: list[int | None] = []

    async def watch() -> None:
        async for leader in redlease.Election(async_client, "watched").observe(timeout=5):
            seen.append(leader)
            if len(seen) == 3:
                break

    async def change() -> None:
        assert await wait_until(lambda: _watching(async_client, "watched"))
        assert await election.campaign("x")
        election_term.append(election.term)
        assert await wait_until(lambda: _seen(seen, 2))
        await election.resign()

    await AsyncTasks.gather(watch, change)
    assert seen == [None, ("x", election_term[0]), None]


async def test_observe_stops_after_its_timeout(async_client: redis.asyncio.Redis) -> None:
    seen = [x async for x in redlease.Election(async_client, "quiet").observe(timeout=0.3)]
    assert seen == [None]
    assert await async_client.zcard(keys("quiet").watchers) == 0


async def test_a_lost_lease_is_reported_and_the_next_term_is_larger(
    async_client: redis.asyncio.Redis,
) -> None:
    lost: list[str] = []
    leader = redlease.Election(async_client, "lost", ttl=0.3, on_lost=lambda: lost.append("x"))
    assert await leader.campaign("a")
    await async_client.delete(keys("lost").holders)  # as if the lease had run out
    assert await wait_until(lambda: _truthy(lost))
    with pytest.raises(redlease.LeadershipLost):
        await leader.resign()
    other = redlease.Election(async_client, "lost")
    assert await other.campaign("b", timeout=5)
    assert (other.term or 0) > 1
    await other.resign()


async def test_an_expired_leader_is_replaced(async_client: redis.asyncio.Redis) -> None:
    dead = redlease.Election(async_client, "dead", ttl=0.3, renew=False)
    assert await dead.campaign("a")
    other = redlease.Election(async_client, "dead")

    async def take_over() -> int:
        assert await other.campaign("b", timeout=10)
        term = other.term or 0
        await other.resign()
        return term

    assert await AsyncTasks.run(take_over) > (dead.term or 0)


async def test_bad_arguments(async_client: redis.asyncio.Redis) -> None:
    election = redlease.Election(async_client, "bad")
    with pytest.raises(TypeError, match="value must be str"):
        await election.campaign(b"x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="ttl must be > 0"):
        redlease.Election(async_client, "bad", ttl=0)


async def test_outage_raises_unavailable(make_server: Any) -> None:
    srv = make_server()
    client = redis.asyncio.Redis(host=srv.host, port=srv.port, socket_timeout=0.5)
    election = redlease.Election(client, "down")
    srv.stop()
    with pytest.raises(redlease.ElectionUnavailable) as info:
        await election.campaign("a")
    assert isinstance(info.value, redlease.Unavailable)
    await client.aclose()


async def _candidates(election: redlease.Election, n: int) -> bool:
    return (await election.inspect()).candidates >= n


async def _led(election: redlease.Election) -> bool:
    return await election.leader() is not None


async def _watching(client: redis.asyncio.Redis, name: str) -> bool:
    return int(await client.zcard(keys(name).watchers)) >= 1


async def _seen(seen: list[Any], n: int) -> bool:
    return len(seen) >= n


async def _truthy(value: list[str]) -> bool:
    return bool(value)


async def test_a_leader_that_lost_may_campaign_again(async_client: redis.asyncio.Redis) -> None:
    election = redlease.Election(async_client, "again", ttl=0.3, renew=False)
    assert await election.campaign("a")
    first = election.term or 0
    await AsyncTasks.sleep(0.5)  # the lease ran out (no watchdog)
    assert await election.campaign("a", timeout=5)
    assert (election.term or 0) > first
    await election.resign()


async def test_a_client_that_decodes_responses_works(server: Any) -> None:
    client = redis.asyncio.Redis(host=server.host, port=server.port, decode_responses=True)
    election = redlease.Election(client, "decoded")
    assert await election.campaign("v")
    assert await election.leader() == ("v", election.term)
    assert (await election.inspect()).mine
    await election.resign()
    sem = redlease.Semaphore(client, "decoded-sem", 1)
    async with sem:
        assert (await sem.inspect()).mine == 1
    await client.aclose()
