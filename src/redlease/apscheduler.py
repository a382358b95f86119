"""APScheduler 3.x jobs run once per scheduled instant, however many schedulers share a Redis.

::

    from apscheduler.schedulers.background import BackgroundScheduler
    from redlease.apscheduler import OnceExecutor

    scheduler = BackgroundScheduler(executors={"default": OnceExecutor(redis.Redis())})
    scheduler.add_job(send_report, "interval", minutes=5, id="send-report")

Run the same scheduler in every process (gunicorn workers, replicas): each fire of a job, its
``job.id`` and scheduled instant, runs on one of them; the others skip it. The key is the
scheduled instant (UTC), never a local clock's "now", so schedulers whose clocks disagree by
seconds still agree on which fire is which. Give jobs explicit ids (the same in every process),
and triggers whose instants are the same in every process: ``cron`` and ``date`` triggers, an
``interval`` trigger with a shared ``start_date`` (without one, each process counts from its
own start, and no two fires coincide).

How: a fire waits for the job's lock (``apscheduler:<job id>``, a lease of ``ttl`` renewed
while the job runs) at most until the job's ``misfire_grace_time`` runs out, then reads the
job's record of its last fire (a ``FencedStore`` written with the lock's fence) and runs only
a fire newer than the last one started. So:

* **at most once per scheduled instant** (what this gives), and also one run of a job at a
  time across the schedulers, as ``max_instances=1`` gives in one;
* a scheduler killed mid-run frees the job within ``ttl``: a scheduler still waiting for that
  fire (``misfire_grace_time`` longer than ``ttl``) runs it again, else nobody does;
* a job that raises has run: it is recorded as done (APScheduler does not retry it either);
* Redis unreachable: the fire is skipped here (a WARNING, ``EVENT_JOB_MISSED``), never run
  twice; if Redis fails after the job ran, its record stays "running" and a scheduler waiting
  for the fire may run it again once the lease ran out;
* ``coalesce``: APScheduler hands over only the last of the missed instants, which is the fire.

Inside a job, :func:`current_fire` tells its fire: the job id, the scheduled instant and the
lock's fence (pass it to storage that must refuse a cut-short run's late writes).

A skipped fire sends no event (the scheduler that ran it sends ``EVENT_JOB_EXECUTED``); one
too late sends ``EVENT_JOB_MISSED``. Skips are logged at DEBUG (``fire_skipped``) and counted
in the metrics (primitive ``apscheduler``, outcome ``not_acquired``). Needs the extra
``redlease[apscheduler]``; thread pool executors only (a process pool cannot carry the lock).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import redis
import redis.asyncio
from apscheduler.events import EVENT_JOB_EXECUTED, EVENT_JOB_MISSED, JobExecutionEvent
from apscheduler.executors.asyncio import AsyncIOExecutor
from apscheduler.executors.base import BaseExecutor
from apscheduler.executors.pool import ProcessPoolExecutor, ThreadPoolExecutor
from apscheduler.util import iscoroutinefunction_partial

from ._async.scheduled import AsyncFires
from ._core.scheduled import MISSED, UNAVAILABLE, Fire, Skipped
from ._sync.scheduled import Fires

__all__ = ["AsyncIOOnceExecutor", "Fire", "OnceExecutor", "Skipped", "current_fire"]

_current: contextvars.ContextVar[Fire | None] = contextvars.ContextVar(
    "redlease_apscheduler_fire", default=None
)


def current_fire() -> Fire | None:
    """The fire the calling job runs for (its job id, scheduled instant and fence), or
    ``None`` outside a job run by :class:`OnceExecutor` or :class:`AsyncIOOnceExecutor`."""
    return _current.get()


class _Wrapper(BaseExecutor):  # type: ignore[misc]
    """Hands each job to the wrapped executor as a :class:`_Proxy` whose function guards its
    fires, and turns the fires it skipped into the events they deserve."""

    def __init__(self, executor: Any, kind: type[Any], default: Callable[[], Any]) -> None:
        super().__init__()
        if executor is None:
            executor = default()
        if not isinstance(executor, kind) or isinstance(executor, (_Wrapper, ProcessPoolExecutor)):
            raise TypeError(
                f"executor must be an APScheduler {kind.__name__} (not a process pool, not "
                f"wrapped already), got {type(executor).__name__}"
            )
        self.executor = executor

    def start(self, scheduler: Any, alias: str) -> None:
        super().start(scheduler, alias)
        self.executor.start(scheduler, alias)
        # The wrapped executor reports each finished submission here: skipped fires out
        # (once only, should the scheduler be started again).
        success = self.executor._run_job_success
        if getattr(success, "func", None) is not _relay:
            self.executor._run_job_success = functools.partial(_relay, success)

    def shutdown(self, wait: bool = True) -> None:
        self.executor.shutdown(wait)

    def submit_job(self, job: Any, run_times: Sequence[datetime]) -> None:
        """Submit ``job`` to the wrapped executor (which counts its instances), each of
        ``run_times`` to run on one scheduler only."""
        self.executor.submit_job(_Proxy(job, self._guard(job, iter(run_times))), run_times)

    def _do_submit_job(self, job: Any, run_times: Sequence[datetime]) -> None:
        raise NotImplementedError("submit_job hands jobs to the wrapped executor")

    def _guard(self, job: Any, run_times: Iterator[datetime]) -> Callable[[], Any]:
        raise NotImplementedError


class OnceExecutor(_Wrapper):
    """An APScheduler 3.x executor that runs each fire of a job on one scheduler only (see the
    module), wrapping ``executor`` (default: a ``ThreadPoolExecutor()``)."""

    def __init__(
        self,
        client: redis.Redis,
        executor: Any = None,
        *,
        ttl: float = 30.0,
        prefix: str = "redlease",
    ) -> None:
        """:param client: your redis-py client (``redis.Redis``; for ``AsyncIOScheduler`` use
            :class:`AsyncIOOnceExecutor`).
        :param executor: the APScheduler executor that runs the jobs (thread pool).
        :param ttl: a running fire's lease in seconds, renewed while the job runs: how long a
            killed scheduler holds up its job.
        :param prefix: the key prefix (no white space or braces).
        """
        super().__init__(executor, BaseExecutor, ThreadPoolExecutor)
        self._fires = Fires(client, ttl=ttl, prefix=prefix)
        self.ttl = ttl

    def _guard(self, job: Any, run_times: Iterator[datetime]) -> Callable[[], Any]:
        call = functools.partial(job.func, *job.args, **job.kwargs)

        def fire() -> Any:  # called once per run time, in order (see _Proxy)
            run_time = next(run_times)

            def body(fence: int) -> Any:
                token = _current.set(Fire(job.id, run_time, fence))
                try:
                    return call()
                finally:
                    _current.reset(token)

            return self._fires.run(job.id, run_time, job.misfire_grace_time, body)

        return fire


class AsyncIOOnceExecutor(_Wrapper):
    """:class:`OnceExecutor` for ``AsyncIOScheduler``: ``client`` is a ``redis.asyncio.Redis``,
    ``executor`` an ``AsyncIOExecutor`` (the default). Coroutine jobs run on the loop, others
    in its default thread pool, both under the fire's lock."""

    def __init__(
        self,
        client: redis.asyncio.Redis,
        executor: Any = None,
        *,
        ttl: float = 30.0,
        prefix: str = "redlease",
    ) -> None:
        """Parameters as :class:`OnceExecutor`'s."""
        super().__init__(executor, AsyncIOExecutor, AsyncIOExecutor)
        self._fires = AsyncFires(client, ttl=ttl, prefix=prefix)
        self.ttl = ttl

    def _guard(self, job: Any, run_times: Iterator[datetime]) -> Callable[[], Any]:
        call = functools.partial(job.func, *job.args, **job.kwargs)
        coroutine = iscoroutinefunction_partial(job.func)

        async def fire() -> Any:  # called once per run time, in order (see _Proxy)
            run_time = next(run_times)

            async def body(fence: int) -> Any:
                token = _current.set(Fire(job.id, run_time, fence))
                try:
                    if coroutine:
                        return await call()
                    # In the loop's default thread pool, as AsyncIOExecutor runs it.
                    run = contextvars.copy_context().run
                    return await asyncio.get_running_loop().run_in_executor(None, run, call)
                finally:
                    _current.reset(token)

            return await self._fires.run(job.id, run_time, job.misfire_grace_time, body)

        return fire


class _Proxy:
    """The job as the wrapped executor sees it: its id, limits and job store, and ``func``,
    the guard of its fires. Without a misfire grace time, APScheduler's ``run_job`` calls
    ``func`` for each run time in order; the guard applies the job's own grace time."""

    def __init__(self, job: Any, func: Callable[[], Any]) -> None:
        self.id = job.id
        self.name = job.name
        self.max_instances = job.max_instances
        self.misfire_grace_time = None
        self._jobstore_alias = job._jobstore_alias
        self.func = func
        self.args: tuple[Any, ...] = ()
        self.kwargs: dict[str, Any] = {}
        self._job = job

    def __str__(self) -> str:
        return str(self._job)


def _relay(success: Callable[[str, list[Any]], None], job_id: str, events: list[Any]) -> None:
    """Pass ``events`` on to ``success``: a fire skipped sends none, one missed or skipped
    for want of Redis ``EVENT_JOB_MISSED`` (it did not run here)."""
    kept = []
    for event in events:
        skipped = getattr(event, "retval", None)
        if event.code != EVENT_JOB_EXECUTED or not isinstance(skipped, Skipped):
            kept.append(event)
        elif skipped.reason in (MISSED, UNAVAILABLE):
            when = event.scheduled_run_time
            kept.append(JobExecutionEvent(EVENT_JOB_MISSED, job_id, event.jobstore, when))
    success(job_id, kept)
