"""The acquire / throttle / shadow tests again, with a ``RedisCluster`` client on the 3 + 3
node cluster fixture (the reservation is one key, in the subject's slot)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_ratelimit_acquire import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks or a private server's command count: nothing cluster-specific"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_bad_acquire_arguments = skipped(_NOT_HERE)
test_bad_mode = skipped(_NOT_HERE)
test_throttle_refuses_what_it_cannot_do = skipped(_NOT_HERE)
test_a_waiter_sends_no_command_while_it_sleeps = skipped(_NOT_HERE)
test_twin_a_polling_waiter_is_seen_by_the_command_count = skipped(_NOT_HERE)
test_twin_out_of_order_finds_a_swap = skipped(_NOT_HERE)
