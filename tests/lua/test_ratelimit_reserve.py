"""The reserving scripts' contracts (``lua/ratelimit_reserve_*.lua``, ``ratelimit_unreserve``):
instants handed out one interval apart, a bound that refuses without writing, a hit that sees
the reservations, and a give-back only while nothing was counted on top."""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import pytest
import redis

from redlease._core import ratelimit as core
from redlease._core import throttle
from redlease._core.rates import Rate

RESERVING = ["gcra", "token_bucket"]
RATE = Rate(window=1.0, amount=4)  # one unit every 250 ms
KEY = b"redlease:ratelimit:api:%s:{s}"


def run(client: redis.Redis, script: Any, key: bytes, args: list[Any]) -> Any:
    return client.evalsha(client.script_load(script.source), 1, key, *args)


def reserve(
    client: redis.Redis, algorithm: str, *, cost: int = 1, bound: float | None = None
) -> throttle.Reservation:
    args = throttle.reserve_args(cost=cost, rate=RATE, burst=RATE.amount, bound=bound)
    script = throttle.reserve_script(algorithm)  # type: ignore[arg-type]
    return throttle.decode_reservation(run(client, script, KEY % algorithm.encode(), args))


def give_back(client: redis.Redis, algorithm: str, got: throttle.Reservation) -> int:
    args = throttle.unreserve_args(stamp=got.stamp, cost=1, rate=RATE, burst=RATE.amount)
    return int(run(client, throttle.UNRESERVE, KEY % algorithm.encode(), args))


def hit(client: redis.Redis, algorithm: str) -> core.RateLimit:
    args = [1, 1, *core.limit_args([RATE], [RATE.amount])]
    script = core.script(algorithm)  # type: ignore[arg-type]
    return core.decode_reply(run(client, script, KEY % algorithm.encode(), args), [RATE])[1]


@pytest.mark.parametrize("algorithm", RESERVING)
def test_the_burst_passes_at_once_then_instants_come_one_interval_apart(
    client: redis.Redis, algorithm: str
) -> None:
    got = [reserve(client, algorithm) for _ in range(8)]
    assert all(g.reserved and g.stamp for g in got)
    assert [g.wait for g in got[:4]] == [0, 0, 0, 0]
    waits = [g.wait for g in got[4:]]
    assert waits == sorted(waits)  # FIFO: each later than the one before
    steps = [b - a for a, b in pairwise(waits)]
    assert all(0.24 < s < 0.26 for s in steps)
    assert 0.2 < waits[0] <= 0.25
    assert client.pttl(KEY % algorithm.encode()) > 1000  # kept while it matters


@pytest.mark.parametrize("algorithm", RESERVING)
def test_a_reservation_past_the_bound_writes_nothing(client: redis.Redis, algorithm: str) -> None:
    for _ in range(4):
        reserve(client, algorithm)
    before = client.dump(KEY % algorithm.encode())
    refused = reserve(client, algorithm, bound=0.1)
    assert not refused.reserved and refused.stamp == b""
    assert 0.2 < refused.wait <= 0.25
    assert client.dump(KEY % algorithm.encode()) == before
    assert reserve(client, algorithm, bound=0.3).reserved  # within the bound: made


@pytest.mark.parametrize("algorithm", RESERVING)
def test_a_hit_sees_the_reservations(client: redis.Redis, algorithm: str) -> None:
    for _ in range(6):  # the burst and two waiters
        reserve(client, algorithm)
    refused = hit(client, algorithm)
    assert not refused.allowed
    assert 0.7 < refused.retry_after <= 0.75  # behind both waiters


@pytest.mark.parametrize("algorithm", RESERVING)
def test_the_last_reservation_is_given_back(client: redis.Redis, algorithm: str) -> None:
    for _ in range(4):
        reserve(client, algorithm)
    before = reserve(client, algorithm, bound=0.0)
    assert not before.reserved
    mine = reserve(client, algorithm)
    assert give_back(client, algorithm, mine) == 1
    again = reserve(client, algorithm)
    assert abs(again.wait - mine.wait) < 0.02  # the same instant is free again
    assert give_back(client, algorithm, again) == 1
    assert give_back(client, algorithm, again) == 0  # once only


@pytest.mark.parametrize("algorithm", RESERVING)
def test_twin_a_reservation_under_a_later_one_is_not_given_back(
    client: redis.Redis, algorithm: str
) -> None:
    for _ in range(4):
        reserve(client, algorithm)
    mine = reserve(client, algorithm)
    later = reserve(client, algorithm)
    before = client.dump(KEY % algorithm.encode())
    assert give_back(client, algorithm, mine) == 0  # the later waiter's instant stays
    assert client.dump(KEY % algorithm.encode()) == before
    assert give_back(client, algorithm, later) == 1


@pytest.mark.parametrize("algorithm", RESERVING)
def test_giving_back_all_leaves_no_trace(client: redis.Redis, algorithm: str) -> None:
    mine = reserve(client, algorithm)
    assert mine.wait == 0
    assert give_back(client, algorithm, mine) == 1
    assert client.dbsize() == 0
