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

:func:`enqueue_once` is RQ's (:mod:`redlease.rq`) for arq: a job enqueued once per function and
arguments, whose lock is taken at enqueue, handed to the job and adopted once by the worker
(register the function with :func:`func`, arq's ``func`` that adopts it), released when the job
ends; a killed worker frees the call within ``_ttl``; a duplicate raises
:class:`~redlease.errors.AlreadyQueued` or, with ``_return_existing=True``, returns the existing
:class:`arq.jobs.Job`. Inside the job, :func:`current_fence` is the lock's fence.
"""

from __future__ import annotations

import contextvars
import datetime
import functools
import logging
import uuid
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import redis
from arq.connections import ArqRedis
from arq.cron import CronJob
from arq.cron import cron as arq_cron
from arq.jobs import Job
from arq.utils import import_string
from arq.worker import Function
from arq.worker import func as arq_func

from ._async.lock import AsyncLock
from ._async.scheduled import AsyncFires
from ._core import handover, validate
from ._core.scheduled import Fire, Skipped
from .errors import AlreadyAdopted, AlreadyQueued, LockLost, LockUnavailable, RedleaseError

__all__ = [
    "AlreadyQueued",
    "Fire",
    "Skipped",
    "cron",
    "current_fence",
    "current_fire",
    "enqueue_once",
    "func",
    "once_key",
]

_log = logging.getLogger("redlease.arq")
_HANDED = "redlease_once"  # the keyword argument that carries the lock to the job
_fence: contextvars.ContextVar[int | None] = contextvars.ContextVar(
    "redlease_arq_fence", default=None
)

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
    target = import_string(coroutine) if isinstance(coroutine, str) else coroutine
    if isinstance(coroutine, str):
        options.setdefault("name", "cron:" + coroutine)
    name = options.pop("name", None) or "cron:" + target.__qualname__

    @functools.wraps(target)
    async def once(ctx: dict[str, Any]) -> Any:
        instant = _instant(name, ctx)
        fires = AsyncFires(ctx["redis"], ttl=ttl, prefix=prefix)

        async def body(fence: int) -> Any:
            token = _current.set(Fire(name, instant, fence))
            try:
                return await target(ctx)
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


def current_fence() -> int | None:
    """The fencing token of the lock the running job holds (``None`` outside one)."""
    return _fence.get()


def once_key(
    function: str, args: Sequence[Any], kwargs: dict[str, Any],
    once_keys: Sequence[str] | None = None,
) -> str:  # fmt: skip
    """The lock's name for a call: ``arq:<function>:`` and its arguments (positional ones in
    order, keyword ones sorted; only the keyword arguments ``once_keys`` when given);
    ``ValueError`` naming ``_once_keys`` when one is not a keyword argument of the call."""
    if once_keys is None:
        parts = [repr(arg) for arg in args] + [f"{k}={kwargs[k]!r}" for k in sorted(kwargs)]
    else:
        missing = [key for key in once_keys if key not in kwargs]
        if missing:
            raise ValueError(f"_once_keys must name keyword arguments of the call, got {missing!r}")
        parts = [f"{key}={kwargs[key]!r}" for key in sorted(once_keys)]
    return f"arq:{function}:{','.join(parts)}"


def _id_key(prefix: str, name: str) -> str:
    """Where the id of the job holding lock ``name`` is kept (beside the lock, in its slot)."""
    return f"{prefix}:{{{name}}}:arq-job"


async def enqueue_once(
    pool: ArqRedis,
    function: str,
    *args: Any,
    _once_keys: Sequence[str] | None = None,
    _timeout: float = 3600,
    _ttl: float = 10.0,
    _return_existing: bool = False,
    _prefix: str = "redlease",
    **kwargs: Any,
) -> Job:
    """Enqueue ``function(*args, **kwargs)`` (a :func:`func` of the workers) unless the same
    call is queued or running (see the module). ``_timeout``: seconds the lock lasts while
    queued; ``_ttl``: the running lease. arq's own ``_`` options pass through."""
    validate.lease_ms(_timeout, "_timeout")
    validate.lease_ms(_ttl, "_ttl")
    options = {k: v for k, v in kwargs.items() if k.startswith("_")}
    call_kwargs = {k: v for k, v in kwargs.items() if not k.startswith("_")}
    name = once_key(function, args, call_kwargs, _once_keys)
    lock = AsyncLock(pool, name, ttl=_timeout, renew=False, prefix=_prefix)
    if not await lock.acquire(blocking=False):
        found = await _existing(pool, _id_key(_prefix, name)) if _return_existing else None
        if found is not None:
            return found
        raise AlreadyQueued((await lock.inspect()).remaining or 0.0, name=name)
    job_id = options.pop("_job_id", None) or uuid.uuid4().hex
    token = await lock.detach()
    try:
        await pool.set(_id_key(_prefix, name), job_id, px=validate.lease_ms(_timeout, "_timeout"))
        handed: dict[str, Any] = {_HANDED: [token, _ttl]}
        job = await pool.enqueue_job(function, *args, _job_id=job_id, **options, **call_kwargs,
                                     **handed)  # fmt: skip
        if job is None:
            raise RuntimeError(f"arq holds a job {job_id!r} already: pass a fresh _job_id")
        return job
    except BaseException as exc:
        try:  # not enqueued: free the key
            await (await AsyncLock.adopt(pool, token)).release()
        except RedleaseError as again:  # Redis failed too: it frees itself after _timeout
            _log.warning("could not free the lock of %s: %s", name, again)
        if isinstance(exc, redis.RedisError):
            raise LockUnavailable(f"could not enqueue {name!r}") from exc
        raise


async def _existing(pool: ArqRedis, where: str) -> Job | None:
    try:
        job_id = await pool.get(where)
    except redis.RedisError as exc:
        raise LockUnavailable(f"could not read the job kept at {where!r}") from exc
    if job_id is None:
        return None
    return Job(job_id.decode() if isinstance(job_id, bytes) else job_id, pool)


def func(coroutine: Callable[..., Awaitable[Any]], **options: Any) -> Function:
    """arq's ``func(coroutine, **options)`` for the workers, which adopts the lock
    :func:`enqueue_once` hands to the job (once: a copy run beside it is skipped), runs
    ``coroutine`` and releases the lock. A job enqueued plainly runs without a lock."""

    @functools.wraps(coroutine)
    async def once(ctx: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        handed = kwargs.pop(_HANDED, None)
        if handed is None:
            return await coroutine(ctx, *args, **kwargs)
        token, ttl = handed
        lease = handover.decode(str(token), "lock")
        lock = await _adopt(ctx, str(token), float(ttl))
        if lock is None:
            return None
        reset = _fence.set(lock.fence)
        try:
            return await coroutine(ctx, *args, **kwargs)
        finally:
            _fence.reset(reset)
            try:
                name = lease.name.decode() if isinstance(lease.name, bytes) else lease.name
                await ctx["redis"].delete(_id_key(lease.prefix, name))
                await lock.release()
            except (RedleaseError, redis.RedisError) as exc:  # it frees itself within ttl
                _log.warning("could not release the lock of %r: %s", lock.name, exc)

    return arq_func(once, **options)


async def _adopt(ctx: dict[str, Any], token: str, ttl: float) -> AsyncLock | None:
    """The job's lock, adopted from ``token`` (or taken afresh if it ran out while queued);
    ``None`` when a copy of the job holds it."""
    try:
        return await AsyncLock.adopt(ctx["redis"], token, ttl=ttl)
    except AlreadyAdopted:
        _log.warning("job %s not run: a copy of it is running", ctx.get("job_id"))
        return None
    except LockLost:  # queued past its timeout: take the key afresh, unless held again
        lease = handover.decode(token, "lock")
        lock = AsyncLock(ctx["redis"], lease.name, ttl=ttl, prefix=lease.prefix)
        if not await lock.acquire(blocking=False):
            _log.warning("job %s skipped: a copy enqueued since holds its key", ctx.get("job_id"))
            return None
        return lock
