"""The RateLimiter tests again, with a ``RedisCluster`` client on the 3 + 3 node cluster fixture.

Every test of ``test_ratelimit.py`` that takes ``async_client`` runs a second time through the
Cluster adapter (``_async/cluster.py``); those that check arguments only, or inject faults
into one private server, are skipped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_ratelimit import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks or a private server's faults: nothing cluster-specific"
_KEYS = "lists keys with KEYS *, which a cluster client asks of one node (layout: one server)"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_outage_raises_rate_limit_unavailable = skipped(_NOT_HERE)
test_bad_limiter_arguments = skipped(_NOT_HERE)
test_bad_hit_arguments = skipped(_NOT_HERE)
test_algorithms_use_separate_keys = skipped(_KEYS)
