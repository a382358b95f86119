"""The cluster adapter asks each master its version once and refuses one without sharded
pub/sub (Redis < 7.0) with a clear error, before any script: not a hang, not a bare
"unknown command". No older server is available here: the verdict itself is tested as a pure
function in tests/core/test_cluster_version.py; these tests show the wiring on the real
cluster (valkey 8.1, accepted), with a refusal recorded for the slot's master by hand."""

from __future__ import annotations

import time

import pytest
import redis.cluster

import redlease
from redlease._sync.runtime import runtime_for
from tests.topology import RedisClusterServers

NAME = "versioned"


def test_every_master_used_was_asked_once_and_accepted(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    lock = redlease.Lock(cluster_client, NAME)
    with lock:
        pass
    backend = runtime_for(cluster_client).backend
    master = cluster.master_of("{" + NAME + "}")
    assert backend._croot._versions == {(master.host, master.port): None}


def test_twin_a_master_recorded_as_too_old_refuses_at_once_naming_the_version(
    cluster: RedisClusterServers, cluster_client: redis.cluster.RedisCluster
) -> None:
    """The same lock, its master's verdict replaced by the one a 6.2 node gets: the acquire
    (which would wait forever) raises LockUnavailable at once, the requirement in its text."""
    master = cluster.master_of("{" + NAME + "}")
    backend = runtime_for(cluster_client).backend
    backend._croot._versions[(master.host, master.port)] = "needs Redis >= 7.0: runs 6.2.14"
    lock = redlease.Lock(cluster_client, NAME)
    began = time.monotonic()
    with pytest.raises(redlease.LockUnavailable, match=r"Redis >= 7\.0") as caught:
        lock.acquire()  # blocking, no timeout
    assert time.monotonic() - began < 10  # generous: a refusal, not a wait
    assert caught.value.__cause__ is not None
    assert "6.2.14" in str(caught.value.__cause__)
