"""The multi-limit tests again, with a ``RedisCluster`` client on the 3 + 3 node cluster
fixture: one subject's limits share a slot (its hash tag), so one script checks them all."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import redlease.asyncio as redlease
from tests._async.helpers import skipped
from tests._async.test_ratelimit_limits import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks only: nothing cluster-specific"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


async def test_subjects_spread_over_the_slots(async_client: Any) -> None:
    limiter = redlease.RateLimiter(async_client, "api", rate="5/second;100/day")
    subjects = [f"user:{i}" for i in range(40)]
    for subject in subjects:
        assert (await limiter.hit(subject)).allowed
    slots = {async_client.keyslot(subject) for subject in subjects}
    assert len(slots) > 30  # one slot per subject, not one per limiter


test_bad_limits = skipped(_NOT_HERE)
test_a_cost_above_the_smallest_limit_is_refused_before_sending = skipped(_NOT_HERE)
