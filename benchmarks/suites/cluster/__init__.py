"""``benchmarks/cluster.py``: redlease's Lock on a Redis Cluster against one server.

- ``config``: the targets, the run's settings and its command line;
- ``uncontended`` (section 1), ``contended`` (2), ``waiting`` (3); the lock processes and the
  figures of a contended run are the hand-off benchmark's (``suites.handoff``);
- ``report``: the tables and the targets; ``main``: the run.
"""
