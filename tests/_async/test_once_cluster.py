"""The Once tests again, with ``RedisCluster`` clients on the 3 + 3 node cluster fixture.

Every test of ``test_once.py`` that takes ``async_client`` (and ``other_host``) runs a second
time through the Cluster adapter (``_async/cluster.py``), renewals included; those that check
arguments only, list keys, or use a private server are skipped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

import redlease.asyncio as redlease
from tests._async.helpers import skipped
from tests._async.test_once import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks or a private server: nothing cluster-specific"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await redlease.close(conn)
    await conn.aclose()


@pytest.fixture
async def other_host(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await redlease.close(conn)
    await conn.aclose()


test_its_key_is_its_own = skipped("lists keys with KEYS *, which a cluster client asks of one node")
test_a_dead_holder_frees_the_name_within_its_ttl = skipped(_NOT_HERE)
test_an_outage_raises_once_unavailable = skipped(_NOT_HERE)
test_bad_arguments = skipped(_NOT_HERE)
test_bad_names_clients_and_functions = skipped(_NOT_HERE)
