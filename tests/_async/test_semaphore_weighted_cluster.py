"""The weighted permit tests again, with a ``RedisCluster`` client against the cluster fixture:
a weighted acquisition is one script call on the master owning the name's slot, as a plain one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests._async.helpers import skipped
from tests._async.test_semaphore_weighted import *  # noqa: F403 - the tests to run again
from tests.topology import RedisClusterServers

_STANDALONE = "runs on the standalone server only"


@pytest.fixture
async def async_client(cluster: RedisClusterServers) -> AsyncIterator[Any]:
    conn = cluster.async_client()
    yield conn
    await conn.aclose()


test_bad_weights_are_refused_naming_the_argument = skipped(_STANDALONE)
test_twin_counting_every_acquisition_as_one_overruns = skipped(_STANDALONE)
