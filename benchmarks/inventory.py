#!/usr/bin/env python
"""Inventory benchmark: reservations per second, atomic vs lock vs WATCH, against a floor.

    .venv/bin/python benchmarks/inventory.py              # full run (about a minute)
    .venv/bin/python benchmarks/inventory.py --quick      # smoke run (about 20 s)
    .venv/bin/python benchmarks/inventory.py --url redis://127.0.0.1:6379 --json out.json

Several buyer processes, each running the same number of concurrent buyers (asyncio tasks),
take one unit at a time from one stock that never runs out, for a fixed time, these ways:

``floor``   a bare ``EVALSHA`` of ``return 1`` with plain redis-py: one round trip, no work;
``seed``    ``EVALSHA`` of the minimal reservation script (:data:`SEED`: ``DECRBY`` if enough
            stock, nothing else) with plain redis-py: no holds, no order ids, no limits;
``seed-lean`` (diagnostic) the seed script sent the way redlease sends its own (its backend:
            a kept connection, no pool checkout per call): ``atomic / seed-lean`` is the cost of
            the reserve's work alone, the I/O path being the same;
``script``  (diagnostic) ``EVALSHA`` of redlease's reserve script with plain redis-py: the
            script's own cost, without redlease's Python layer (checks, pool, decoding);
``atomic``  ``redlease.asyncio.Inventory.reserve`` (per-buyer limit 1, a new buyer each time);
``lock``    ``redlease.asyncio.Lock`` around ``GET stock`` / ``SET stock-1`` (one lock handle
            per process, shared by its buyers: they queue locally, one at a time in Redis);
``watch``   ``WATCH`` / ``GET`` / ``MULTI`` / ``SET`` / ``EXEC``, retried on conflict.

Only operations that start and end inside the measured window count (after a warm-up). The
strategies are interleaved over several rounds (the order reversed every other round) and each
keeps its best round, so a noisy neighbour hurts all of them alike. Each row also shows the CPU
one reservation cost the buyer processes and (with a private server) the server. Targets,
judged on figures of this same run: atomic >= 10x lock (one round trip, no waiting), the floor
at most 1.2x atomic, and atomic at least 0.8x seed (all of the reserve's work costs at most a
fifth of the rate of the bare decrement). Every child process is reaped and every wait is bounded.
"""

from __future__ import annotations

import sys

from suites.inventory.main import main

if __name__ == "__main__":
    sys.exit(main())
