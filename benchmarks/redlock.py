#!/usr/bin/env python
"""Redlock benchmark: redlease's Redlock against pottery and aioredlock, 1 and 5 servers, one run.

    .venv/bin/python benchmarks/redlock.py              # full run (about 2-3 minutes)
    .venv/bin/python benchmarks/redlock.py --quick      # smoke run (under a minute)
    .venv/bin/python benchmarks/redlock.py --urls redis://h:1,redis://h:2,... --json out.json

Five servers are started here (``tests.topology.RedisServer``, default settings) unless
``--urls`` gives five. Three measurements, each library with its defaults and a 10 s lease:

1. uncontended acquire+release latency over 1 and over 5 servers, interleaved with raw
   fan-out floors (``SET NX PX`` then a compare-and-delete ``EVALSHA`` on every server);
   the figure of merit is how much the 5-server p50 costs over the 1-server p50;
2. 16 worker processes on one lock over 5 servers: throughput, per-process spread
   (starvation), longest wait, failed attempts, and a mutual-exclusion check;
3. 2 of the 5 servers paused (SIGSTOP): does each library still acquire, and how fast.

Targets are judged with ratios of figures measured in this same run. See benchmarks/README.md.
The sections are in ``suites/redlock/``; the process plumbing (start flags, reaping, bounded
waits), the interleaved latency loop, the figures of a contended run and the table printer are
the shared harness's (``harness/``).
"""

from __future__ import annotations

import sys

from suites.redlock.main import main

if __name__ == "__main__":
    sys.exit(main())
