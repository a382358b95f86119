"""``benchmarks/jobs_fire.py``: what redlease's scheduler and queue glue costs per fire or
enqueue, beside the bare path, one section per framework.

- ``measure``: the rows, the clients that count round trips, the interleaved rounds;
- ``aps``, ``beat``, ``rq_rows``, ``arq_rows``: one section each (APScheduler, Celery beat,
  RQ, arq), run only where the framework imports;
- ``main``: the run, the table and the JSON file.
"""
