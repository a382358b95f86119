"""The FencedStore tests again, with a ``RedisCluster`` client on the 3 + 3 node cluster fixture.

Every test of ``test_fencing.py`` that takes ``async_client`` runs a second time through the
Cluster adapter: the store's keys share the lock's hash tag, so each script runs in one slot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_fencing import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks, pure key layout or a private server: nothing cluster-specific"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_keys_share_one_cluster_slot_with_the_lock = skipped(_NOT_HERE)
test_bad_fences_are_refused_before_anything_is_sent = skipped(_NOT_HERE)
test_bad_values_and_fields_name_the_argument = skipped(_NOT_HERE)
test_a_decoding_client_works_too = skipped(_NOT_HERE)
test_an_outage_raises_unavailable_with_the_cause = skipped(_NOT_HERE)
