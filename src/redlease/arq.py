"""arq cron jobs run once per scheduled instant, however many workers run them
(``redlease[arq]``).

::

    from redlease.arq import cron

    class WorkerSettings:
        cron_jobs = [cron(send_report, minute={0, 30})]

``cron`` takes arq's ``cron`` options and returns an arq ``CronJob`` whose coroutine guards
each fire: the fire's key is the job's name and its scheduled instant (arq's unique job id,
``<name>:<ms>``), so workers whose clocks disagree by a little still agree on which fire is
which, and the first worker to take the job's lock (a lease of ``ttl`` renewed while it runs)
and find the fire newer than the job's record runs it; the others skip it (arq's own ``unique``
is not atomic: a worker late by more than the run enqueues the fire again, arq#196). So:

* **at most once per scheduled instant**, and one run of the job at a time across workers;
* a worker killed mid-run frees the job within ``ttl``: a copy of the fire still waiting runs
  it again, else nobody does (arq does not retry a cron job either);
* a run that raises has run: it is recorded as done;
* Redis unreachable: the fire is skipped (a WARNING), never run twice.

The lock and the record live on arq's own Redis (``ctx["redis"]``). Inside the job,
:func:`current_fire` gives its name, scheduled instant and the lock's fence.
"""

from __future__ import annotations

import contextvars
import datetime
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from arq.cron import CronJob
from arq.cron import cron as arq_cron
from arq.utils import import_string

from ._async.scheduled import AsyncFires
from ._core import validate
from ._core.scheduled import Fire, Skipped

__all__ = ["Fire", "Skipped", "cron", "current_fire"]

_current: contextvars.ContextVar[Fire | None] = contextvars.ContextVar(
    "redlease_arq_fire", default=None
)


def current_fire() -> Fire | None:
    """The fire the running cron job runs for (name, scheduled instant, fence), or ``None``."""
    return _current.get()


def cron(
    coroutine: str | Callable[..., Awaitable[Any]],
    *,
    ttl: float = 30.0,
    grace: float | None = 60.0,
    prefix: str = "redlease",
    **options: Any,
) -> CronJob:
    """An arq ``cron(coroutine, **options)`` whose each fire runs on one worker only.

    :param ttl: a running fire's lease in seconds, renewed while it runs.
    :param grace: seconds after its instant a fire may still start (waiting for the job's
        lock held by another run); ``None``: no limit.
    :param prefix: the key prefix.
    :param options: arq's ``cron`` options (``name``, ``second``, ``timeout``...); ``unique``
        and ``job_id`` are not accepted: the fire's key is arq's unique job id.
    """
    validate.lease_ms(ttl, "ttl")
    if grace is not None and not grace >= 0:
        raise ValueError(f"grace must be None or >= 0 seconds, got {grace!r}")
    for taken in ("unique", "job_id"):
        if taken in options:
            raise ValueError(f"{taken} is not accepted: the fire's key is arq's unique job id")
    func = import_string(coroutine) if isinstance(coroutine, str) else coroutine
    if isinstance(coroutine, str):
        options.setdefault("name", "cron:" + coroutine)
    name = options.pop("name", None) or "cron:" + func.__qualname__

    @functools.wraps(func)
    async def once(ctx: dict[str, Any]) -> Any:
        instant = _instant(name, ctx)
        fires = AsyncFires(ctx["redis"], ttl=ttl, prefix=prefix)

        async def body(fence: int) -> Any:
            token = _current.set(Fire(name, instant, fence))
            try:
                return await func(ctx)
            finally:
                _current.reset(token)

        result = await fires.run(name, instant, grace, body)
        return None if isinstance(result, Skipped) else result

    return arq_cron(once, name=name, unique=True, **options)


def _instant(name: str, ctx: dict[str, Any]) -> datetime.datetime:
    """The fire's scheduled instant, from arq's unique job id ``<name>:<ms>``."""
    job_id = str(ctx["job_id"])
    head, _, ms = job_id.rpartition(":")
    if head != name or not ms.isdigit():
        raise RuntimeError(f"redlease.arq.cron: job id {job_id!r} is not {name!r}:<ms>")
    return datetime.datetime.fromtimestamp(int(ms) / 1000, datetime.timezone.utc)
