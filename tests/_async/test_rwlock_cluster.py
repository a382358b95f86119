"""The rwlock tests again, with a ``RedisCluster`` client against the 3 + 3 node cluster fixture.

Every test of ``test_rwlock.py`` that takes ``async_client`` runs here a second time through the
Cluster adapter: each script on the master owning the name's slot, waiters woken by SPUBLISH on
a channel in that slot (``runtime.hub_for``, ``runtime.channels``). Fault and argument tests
run on the standalone server only.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_rwlock import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_STANDALONE = "runs on the standalone server only"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_outage_raises_unavailable = skipped(_STANDALONE)
