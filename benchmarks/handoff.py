#!/usr/bin/env python
"""Hand-off benchmark: redlease against redis-py's Lock and python-redis-lock, in one run.

    .venv/bin/python benchmarks/handoff.py              # full run (about 2-3 minutes)
    .venv/bin/python benchmarks/handoff.py --quick      # smoke run (about 40 s)
    .venv/bin/python benchmarks/handoff.py --url redis://127.0.0.1:6379 --json out.json

Four measurements, each for every library, all against one server started here
(``redlease.server.RedisServer`` with default settings) unless ``--url`` is given:

1. uncontended acquire+release latency, interleaved with a raw floor
   (``SET key token NX PX`` + ``EVALSHA`` compare-and-delete with plain redis-py);
2. N worker processes hammering one lock: throughput, hand-off latency between processes,
   longest wait, per-process spread, and a mutual-exclusion check;
3. Redis commands per second per blocked waiter while the lock is held;
4. crash recovery: the holder is SIGKILLed, how long until an already-waiting process has it.

Targets are judged with ratios of figures measured in this same run. See benchmarks/README.md.
Every child process is reaped and every wait is bounded; a library that fails is reported as
an error row.
"""

from __future__ import annotations

import sys

from suites.handoff.main import main

if __name__ == "__main__":
    sys.exit(main())
