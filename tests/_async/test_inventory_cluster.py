"""The Inventory tests again, with a ``RedisCluster`` client on the 3 + 3 node cluster fixture.

Every test of the ``test_inventory_*.py`` files imported below that takes ``async_client``
runs a second time through the Cluster adapter (``_async/cluster.py``); those that check
arguments only, or inject faults into one private server, are skipped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_inventory_errors import *  # noqa: F403 - the tests to run again
from tests._async.test_inventory_orders import *  # noqa: F403 - the tests to run again
from tests._async.test_inventory_reserve import *  # noqa: F403 - the tests to run again
from tests._async.test_inventory_reserve_command import *  # noqa: F403 - the tests to run again
from tests._async.test_inventory_retention import *  # noqa: F403 - the tests to run again
from tests._async.test_inventory_withdraw import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_NOT_HERE = "argument checks or a private server's faults: nothing cluster-specific"
_KEYS = "lists keys with KEYS *, which a cluster client asks of one node (layout: one server)"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_outage_raises_inventory_unavailable = skipped(_NOT_HERE)
test_bad_reserve_arguments_are_refused_before_redis = skipped(_NOT_HERE)
test_bad_restock_is_refused = skipped(_NOT_HERE)
test_bad_order_ids_are_refused = skipped(_NOT_HERE)
test_keys_share_one_hash_tag_and_hold_only_live_data = skipped(_KEYS)
test_reserve_encodes_ids_as_the_client_does = skipped(_NOT_HERE)
test_reserve_encoding_twin_is_caught = skipped(_NOT_HERE)
test_reserve_survives_a_flushed_script_cache = skipped(_NOT_HERE)
