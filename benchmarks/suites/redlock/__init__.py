"""``benchmarks/redlock.py``: redlease's Redlock against pottery and aioredlock, 1 and 5 servers.

- ``config``: the targets, the run's settings and its command line;
- ``libs``: each library's Redlock over a list of servers, in one process;
- ``uncontended`` (section 1), ``contended`` (2) with ``trace`` (``--why``), ``paused`` (3);
- ``report``: the tables and the targets; ``main``: the run.
"""
