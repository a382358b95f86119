#!/usr/bin/env python
"""Cluster benchmark: redlease's Lock on a Redis Cluster against the same on one server, in one run.

    .venv/bin/python benchmarks/cluster.py              # full run (about 3 minutes)
    .venv/bin/python benchmarks/cluster.py --quick      # smoke run (about 60 s)
    .venv/bin/python benchmarks/cluster.py --json out.json
    .venv/bin/python benchmarks/cluster.py --sections 2 --repeats 4   # on a quiet machine

It starts, itself, one server (``redlease.server.RedisServer``) and a 3-master + 3-replica
cluster (``tests.topology.RedisClusterServers``), all on 127.0.0.1, and stops them at the
end (also on Ctrl-C, SIGTERM or an error). Three measurements (issue 9's "Done when"):

1. uncontended acquire+release p50 of redlease's ``Lock`` (sync and asyncio) and of the raw
   floor (SET NX PX + EVALSHA compare-and-delete), on the server and on the cluster,
   interleaved in rounds so that the machine's noise hits both alike: cluster / server;
2. N processes on one lock (4 and 16), on the server and on the cluster, alternated
   (server, cluster, then cluster, server, ...): acquisitions/s, hand-off p50, longest wait,
   per-process min/max, mutual exclusion; cluster / server;
3. on the cluster, one holder (30 s lease) and 8 waiter processes blocked on it: the commands
   every node (masters and replicas) processed over a window that ends before the holder's
   first renewal (ttl / 3), from ``INFO commandstats``, without the commands of the probe
   itself, of replication and of the cluster's own traffic (named in the table), and minus a
   baseline window with the lock held and no waiter; per blocked waiter per second.

The sections are in ``suites/cluster/``; the lock processes and their figures are
``handoff.py``'s (``suites/handoff/``: the clients of a ``redis+cluster://host:port`` URL are
``RedisCluster`` clients), the plumbing and the tables the shared harness's (``harness/``).
"""

from __future__ import annotations

import sys

from suites.cluster.main import main

if __name__ == "__main__":
    sys.exit(main())
