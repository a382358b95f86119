"""The rate-limit scripts' contracts, for every algorithm (``lua/ratelimit_*.lua``).

What ``test_ratelimit_bounds.py`` checks on random runs (the documented bounds) is not
repeated here; these are the contract's other promises: a burst of ``L`` then a refusal
with a retry time, a peek never writes, a hit refused by one limit is counted by none, every
key expires, and reset forgets the subject.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import redis

from redlease._core import ratelimit as core
from redlease._core.ratelimit import RateLimit
from redlease._core.rates import Rate

ALGORITHMS = ["fixed", "sliding", "gcra", "token_bucket"]
MINUTE = Rate(window=60.0, amount=3)


def hit(
    client: redis.Redis,
    algorithm: str,
    rates: Sequence[Rate],
    *,
    cost: int = 1,
    consume: bool = True,
) -> RateLimit:
    keys = core.keys("redlease", b"api", algorithm, b"user:1", rates)  # type: ignore[arg-type]
    args: list[Any] = [cost, int(consume), *core.limit_args(rates, [r.amount for r in rates])]
    script = core.script(algorithm)  # type: ignore[arg-type]
    raw = client.evalsha(client.script_load(script.source), len(keys), *keys, *args)
    return core.decode_reply(raw, rates)[1]


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_burst_of_the_limit_passes_then_a_hit_is_refused_with_a_retry_time(
    client: redis.Redis, algorithm: str
) -> None:
    answers = [hit(client, algorithm, [MINUTE]) for _ in range(4)]
    assert [a.allowed for a in answers] == [True, True, True, False]
    assert [a.remaining for a in answers[:3]] == [2, 1, 0]
    # At most two windows: sliding's windows are aligned on the clock, and a burst at one's
    # end weighs on the next.
    assert 0 < answers[3].retry_after <= 120


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_peek_never_writes(client: redis.Redis, algorithm: str) -> None:
    assert hit(client, algorithm, [MINUTE], consume=False).remaining == 3
    assert client.dbsize() == 0
    hit(client, algorithm, [MINUTE])
    before = {k: client.dump(k) for k in client.scan_iter()}
    assert hit(client, algorithm, [MINUTE], consume=False).remaining == 2
    assert {k: client.dump(k) for k in client.scan_iter()} == before


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_a_hit_refused_by_one_limit_is_counted_by_none(client: redis.Redis, algorithm: str) -> None:
    rates = [Rate(window=1.0, amount=5), Rate(window=60.0, amount=2)]
    hit(client, algorithm, rates)
    hit(client, algorithm, rates)
    refused = hit(client, algorithm, rates)
    assert not refused.allowed and [r.allowed for r in refused.limits] == [True, False]
    peek = hit(client, algorithm, rates, consume=False)
    assert peek.limits[0].remaining == 3  # the refused hit took nothing from the first limit


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_twin_an_admitted_hit_is_counted_by_every_limit(
    client: redis.Redis, algorithm: str
) -> None:
    """The twin: an admitted third hit does take from the first limit, so the 3 above is
    the refusal's doing."""
    rates = [Rate(window=1.0, amount=5), Rate(window=60.0, amount=3)]
    for _ in range(3):
        assert hit(client, algorithm, rates).allowed
    assert hit(client, algorithm, rates, consume=False).limits[0].remaining == 2


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_every_key_expires(client: redis.Redis, algorithm: str) -> None:
    hit(client, algorithm, [MINUTE, Rate(window=1.0, amount=2)])
    ttls = [client.pttl(k) for k in client.scan_iter()]
    assert len(ttls) == 2 and all(0 < ms <= 120_000 for ms in ttls)


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_reset_forgets_the_subject(client: redis.Redis, algorithm: str) -> None:
    keys = core.keys("redlease", b"api", algorithm, b"user:1", [MINUTE])  # type: ignore[arg-type]
    for _ in range(3):
        hit(client, algorithm, [MINUTE])
    assert not hit(client, algorithm, [MINUTE]).allowed
    sha = client.script_load(core.RESET.source)
    assert client.evalsha(sha, len(keys), *keys) == 1
    assert client.evalsha(sha, len(keys), *keys) == 0  # nothing left to forget
    assert hit(client, algorithm, [MINUTE]).remaining == 2
