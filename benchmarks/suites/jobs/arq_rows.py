"""arq: ``enqueue_once`` beside ``pool.enqueue_job``, and the worker's side: the coroutine
``redlease.arq.cron`` makes beside the bare cron coroutine, and ``redlease.arq.func``'s
wrapper beside the bare job coroutine. arq 0.28 needs redis-py < 6: the section runs only
where arq imports.

The worker's rows await the coroutine an arq worker awaits for a job it took, with the
``ctx`` it would pass (its pool and the job's id); no worker loop around it. A cron fire's job
id is arq's, ``<name>:<ms of its instant>``: a new instant each call for a run (instants from
now on, within the default ``grace``), a fixed one, run before the rounds, for a skip. The
jobs of the ``func`` rows are enqueued before each round, untimed, and their arguments (the
handed lock among them) read back as the worker would.

Rows: ``pool.enqueue_job`` (bare), ``enqueue_once`` and ``enqueue_once: duplicate`` (as
RQ's); ``cron coroutine`` (bare), ``cron: fire run`` (the job's lock, its record read,
written at the start and the end, released), ``cron: fire skip``; ``func coroutine`` (bare),
``func: adopt + release`` (the handed lock adopted on a renewed lease, the id deleted, the
lock released).
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable
from typing import Any

import redis.asyncio
from arq.connections import ArqRedis

from redlease.arq import AlreadyQueued, cron, enqueue_once, func
from suites.jobs.measure import Row

SECTION = "arq"
ENQUEUE = "pool.enqueue_job"
CRON, FUNC = "cron coroutine", "func coroutine"


async def tick(ctx: dict[str, Any]) -> None:
    """The cron job: nothing, so that what is measured is what runs it."""


async def noop(ctx: dict[str, Any], n: int) -> int:
    """The enqueued job: nothing."""
    return n


def rows(pool: redis.asyncio.ConnectionPool, closers: list[Any]) -> list[Row]:
    arq_pool = ArqRedis(pool, default_queue_name="bench")
    closers.append(arq_pool.aclose if hasattr(arq_pool, "aclose") else arq_pool.close)
    numbers = itertools.count()
    return [
        *_enqueue_rows(arq_pool, numbers),
        *_cron_rows(arq_pool),
        *_func_rows(arq_pool, numbers),
    ]


def _enqueue_rows(pool: ArqRedis, numbers: Any) -> list[Row]:
    async def bare() -> None:
        await pool.enqueue_job("noop", next(numbers))

    async def once() -> None:
        await enqueue_once(pool, "noop", next(numbers), _prefix="bench")

    async def duplicate() -> None:
        try:
            await enqueue_once(pool, "noop", -1, _prefix="bench")
        except AlreadyQueued:
            return
        raise AssertionError("a duplicate was enqueued")

    async def first(n: int) -> None:  # queued: the same call again is a duplicate
        with contextlib.suppress(AlreadyQueued):
            await enqueue_once(pool, "noop", -1, _prefix="bench")

    return [
        Row(SECTION, ENQUEUE, bare),
        Row(SECTION, "enqueue_once", once, bare=ENQUEUE),
        Row(SECTION, "enqueue_once: duplicate", duplicate, bare=ENQUEUE, prepare=first),
    ]


def _cron_rows(pool: ArqRedis) -> list[Row]:
    run_job = cron(tick, name="bench-run", prefix="bench").coroutine
    skip_job = cron(tick, name="bench-skip", prefix="bench").coroutine
    next_ms = itertools.count(int(time.time() * 1000))
    skipped = {"redis": pool, "job_id": f"bench-skip:{int(time.time() * 1000)}"}
    bare_ctx = {"redis": pool, "job_id": "bench-bare:0"}

    async def bare() -> None:
        await tick(bare_ctx)

    async def run() -> None:
        await run_job({"redis": pool, "job_id": f"bench-run:{next(next_ms)}"})

    async def skip() -> None:
        await skip_job(skipped)

    async def first(n: int) -> None:  # ran before the rounds: every later try skips
        await skip_job(skipped)

    return [
        Row(SECTION, CRON, bare),
        Row(SECTION, "cron: fire run", run, bare=CRON),
        Row(SECTION, "cron: fire skip", skip, bare=CRON, prepare=first),
    ]


def _func_rows(pool: ArqRedis, numbers: Any) -> list[Row]:
    wrapped = func(noop).coroutine
    jobs: dict[str, list[tuple[dict[str, Any], tuple[Any, ...], dict[str, Any]]]] = {}

    def preparer(kind: str, once: bool) -> Callable[[int], Any]:
        async def prepare(n: int) -> None:
            jobs[kind] = []
            for _ in range(n):
                if once:
                    job = await enqueue_once(pool, "noop", next(numbers), _prefix="bench")
                else:
                    job = await pool.enqueue_job("noop", next(numbers))
                info = await job.info()
                ctx = {"redis": pool, "job_id": job.job_id}
                jobs[kind].append((ctx, info.args, info.kwargs))

        return prepare

    async def bare() -> None:
        ctx, args, kwargs = jobs["bare"].pop()
        await noop(ctx, *args, **kwargs)

    async def adopt() -> None:
        ctx, args, kwargs = jobs["once"].pop()
        if await wrapped(ctx, *args, **kwargs) is None:
            raise AssertionError(f"job {ctx['job_id']} did not run")

    return [
        Row(SECTION, FUNC, bare, prepare=preparer("bare", False)),
        Row(SECTION, "func: adopt + release", adopt, bare=FUNC, prepare=preparer("once", True)),
    ]
