"""RQ jobs enqueued once: at most one queued or running copy per function and arguments
(``redlease[rq]``).

::

    from redis import Redis
    from rq import Queue
    from redlease.rq import AlreadyQueued, enqueue_once

    queue = Queue(connection=Redis())
    job = enqueue_once(queue, "reports.build", "2026-11", once_keys=["month"])

``enqueue_once`` takes a lock named after the function and its arguments (all of them, or only
``once_keys``) for ``timeout`` seconds, and enqueues the job with the lock's hand-over token. A
stock ``rq worker`` runs it: the job adopts the lock on a short lease (``ttl``, renewed while it
runs), runs the function, and releases the lock when it ends, success or failure. So the same
call enqueued again while the first is queued or running raises
:class:`~redlease.errors.AlreadyQueued` (or, with ``return_existing=True``, returns the existing
:class:`rq.job.Job`); a worker killed
mid-job frees the lock within ``ttl``; a copy of the job run while the first runs (a requeued
job) is skipped, never run beside it (the token is adopted once). Inside the job,
:func:`current_fence` is the lock's fencing token.

The job's function, as RQ stores it, is ``redlease.rq.run_once`` (its first argument names
yours): install redlease in the workers. Keyword arguments RQ reads itself (``job_timeout``,
``result_ttl``, ``job_id``, ``at_front``, ``meta``, ``depends_on``...) are RQ's; ``ttl``
here is the running lease, not RQ's job ``ttl``. With Redis unreachable, nothing is
enqueued (:class:`redlease.LockUnavailable`).
"""

from __future__ import annotations

import contextvars
import importlib
import logging
import uuid
from collections.abc import Callable, Sequence
from inspect import signature
from typing import Any

import redis
import rq
from rq.job import Job

from ._core import handover, validate
from ._sync.lock import Lock
from .errors import AlreadyAdopted, AlreadyQueued, LockLost, LockUnavailable, RedleaseError

__all__ = ["AlreadyQueued", "current_fence", "enqueue_once", "once_key", "run_once"]

_log = logging.getLogger("redlease.rq")
_fence: contextvars.ContextVar[int | None] = contextvars.ContextVar("redlease_rq", default=None)
_RQ_OPTIONS = frozenset(
    [
        "job_timeout",
        "result_ttl",
        "failure_ttl",
        "description",
        "depends_on",
        "job_id",
        "at_front",
        "meta",
        "retry",
        "repeat",
        "on_success",
        "on_failure",
        "on_stopped",
        "pipeline",
        "unique",
        "rate_limit",
        "webhooks",
    ]
)


def current_fence() -> int | None:
    """The fencing token of the lock the running job holds (``None`` outside one)."""
    return _fence.get()


def _name_of(func: Callable[..., Any] | str) -> str:
    if isinstance(func, str):
        return func
    return f"{func.__module__}.{func.__qualname__}"


def _resolve(name: str) -> Callable[..., Any]:
    module, _, attribute = name.rpartition(".")
    found: Callable[..., Any] = getattr(importlib.import_module(module), attribute)
    return found


def once_key(
    func: Callable[..., Any] | str, args: Sequence[Any], kwargs: dict[str, Any],
    once_keys: Sequence[str] | None = None,
) -> str:  # fmt: skip
    """The lock's name for a call: ``rq:<function>:`` and its arguments by name (bound to the
    signature, defaults applied; only ``once_keys`` when given), sorted; ``ValueError``
    naming ``once_keys`` when one is not an argument."""
    target = _resolve(func) if isinstance(func, str) else func
    bound = signature(target).bind(*args, **kwargs)
    bound.apply_defaults()
    arguments = dict(bound.arguments)
    wanted = list(arguments) if once_keys is None else list(once_keys)
    missing = [key for key in wanted if key not in arguments]
    if missing:
        raise ValueError(f"once_keys must name arguments of {_name_of(func)}, got {missing!r}")
    parts = ",".join(f"{key}={arguments[key]!r}" for key in sorted(wanted))
    return f"rq:{_name_of(func)}:{parts}"


def _id_key(prefix: str, name: str | bytes) -> str:
    """Where the id of the job holding lock ``name`` is kept (beside the lock, in its slot)."""
    shown = name.decode(errors="replace") if isinstance(name, bytes) else name
    return f"{prefix}:{{{shown}}}:rq-job"


def enqueue_once(
    queue: rq.Queue,
    func: Callable[..., Any] | str,
    *args: Any,
    once_keys: Sequence[str] | None = None,
    timeout: float = 3600,
    ttl: float = 10.0,
    return_existing: bool = False,
    prefix: str = "redlease",
    **kwargs: Any,
) -> Job:
    """Enqueue ``func(*args, **kwargs)`` on ``queue`` unless the same call is queued or
    running (see the module). ``timeout``: seconds the lock lasts while queued; ``ttl``: the
    running lease."""
    validate.lease_ms(timeout, "timeout")
    validate.lease_ms(ttl, "ttl")
    options = {k: v for k, v in kwargs.items() if k in _RQ_OPTIONS}
    call_kwargs = {k: v for k, v in kwargs.items() if k not in _RQ_OPTIONS}
    conn = queue.connection
    lock = Lock(conn, once_key(func, args, call_kwargs, once_keys), ttl=timeout, renew=False,
                prefix=prefix)  # fmt: skip
    if not lock.acquire(blocking=False):
        found = _existing(conn, _id_key(prefix, lock.name)) if return_existing else None
        if found is not None:
            return found
        raise AlreadyQueued(lock.inspect().remaining or 0.0, name=lock.name)
    job_id = options.pop("job_id", None) or str(uuid.uuid4())
    token = lock.detach()
    try:
        conn.set(_id_key(prefix, lock.name), job_id, px=validate.lease_ms(timeout, "timeout"))
        return queue.enqueue(
            run_once, _name_of(func), token, ttl, *args, job_id=job_id, **options, **call_kwargs
        )
    except BaseException as exc:
        try:  # not enqueued: free the key
            Lock.adopt(conn, token).release()
        except RedleaseError as again:  # Redis failed too: it frees itself after timeout
            _log.warning("could not free the lock of %s: %s", lock.name, again)
        if isinstance(exc, redis.RedisError):
            raise LockUnavailable(f"could not enqueue {lock.name!r}") from exc
        raise


def _existing(conn: Any, where: str) -> Job | None:
    try:
        job_id = conn.get(where)
        if job_id is None:
            return None
        return Job.fetch(job_id.decode() if isinstance(job_id, bytes) else job_id, connection=conn)
    except rq.exceptions.NoSuchJobError:
        return None
    except redis.RedisError as exc:
        raise LockUnavailable(f"could not read the job kept at {where!r}") from exc


def run_once(func_name: str, token: str, ttl: float, *args: Any, **kwargs: Any) -> Any:
    """What the worker runs: adopt the lock (once), run ``func_name``, release it."""
    job = rq.get_current_job()
    if job is None:
        raise RuntimeError("redlease.rq.run_once runs inside an RQ job only")
    conn = job.connection
    lease = handover.decode(token, "lock")
    try:
        lock = Lock.adopt(conn, token, ttl=ttl)
    except AlreadyAdopted:
        _log.warning("job %s not run: a copy of it is running", job.id)
        return None
    except LockLost:  # queued past its timeout: take the key afresh, unless held again
        lock = Lock(conn, lease.name, ttl=ttl, prefix=lease.prefix)
        if not lock.acquire(blocking=False):
            _log.warning("job %s skipped: a copy enqueued since holds its key", job.id)
            return None
    reset = _fence.set(lock.fence)
    try:
        return _resolve(func_name)(*args, **kwargs)
    finally:
        _fence.reset(reset)
        try:
            conn.delete(_id_key(lease.prefix, lease.name))
            lock.release()
        except (RedleaseError, redis.RedisError) as exc:  # it frees itself within ttl
            _log.warning("could not release the lock of %r: %s", lock.name, exc)
