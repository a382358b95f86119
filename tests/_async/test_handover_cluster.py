"""The hand-over tests again, with a ``RedisCluster`` client against the cluster fixture:
detach and adopt run on the master of the lock's slot (the subprocess adopts there too)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.test_handover import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()
