#!/usr/bin/env python
"""What redlease's job glue costs per fire or enqueue, beside the bare path, in one run.

    .venv/bin/python benchmarks/jobs_fire.py                  # about 15-45 s
    .venv/bin/python benchmarks/jobs_fire.py --quick          # smoke run, about 3-5 s
    .venv/bin/python benchmarks/jobs_fire.py --sections rq,arq --json out.json
    /tmp/arqvenv/bin/python benchmarks/jobs_fire.py          # arq's too: see benchmarks/README.md

One section per framework, run only where it imports (arq 0.28 needs redis-py < 6, so its
section runs in a venv of its own), each a bare row and the glue's rows beside it:

- APScheduler: ``OnceExecutor`` (a fire run, a fire skipped) vs the executor it wraps, both
  down to APScheduler's ``run_job`` in the caller's thread (the pool's hand-off left out);
- Celery beat: ``BeatScheduler.apply_entry`` (a fire sent, a fire skipped) vs the stock
  ``Scheduler.apply_entry``, the broker send left out of both (and, for scale, the stock path
  sending to kombu's in-memory transport);
- RQ: ``enqueue_once`` (and a duplicate) vs ``queue.enqueue``; ``job.perform()`` of the
  ``run_once`` wrapper (adopt, run, release) vs of the bare function;
- arq: ``enqueue_once`` (and a duplicate) vs ``pool.enqueue_job``; ``redlease.arq.cron``'s
  coroutine (a fire run, a fire skipped) vs the bare one; ``redlease.arq.func``'s wrapper
  (adopt, run, release) vs the bare coroutine.

Every job is a no-op, so what is measured is what runs it. All rows are interleaved over
``--rounds`` rounds (the order reversed every other round). Per row: client time per call
(p50, p99, in us), the glue's p50 as a multiple of its bare row's and the microseconds it
adds, round trips per call (counted on the client's connections) and commands per call (the
server's INFO commandstats, commands run by scripts included). A PING and a ``Lock``
acquire + release are the units to read them by. Runs its own server unless ``--url``.
"""

from __future__ import annotations

import sys

from suites.jobs.main import main

if __name__ == "__main__":
    sys.exit(main(__doc__))
