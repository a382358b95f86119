"""``benchmarks/handoff.py``: redlease against redis-py's Lock and python-redis-lock.

- ``config``: the targets, the run's settings and its command line;
- ``libs``: each library's lock, the clients for a server or a cluster, the server probes;
- ``workers``: the child processes (contenders, a holder, waiters);
- ``uncontended`` (section 1), ``contended`` (2), ``held`` (3 waiting load, 4 crash recovery);
- ``report``: the tables and the targets; ``main``: the run.
"""
