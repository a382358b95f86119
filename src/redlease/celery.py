"""Celery tasks enqueued once, as celery-once users know them, with leases that follow the task.

::

    from redlease.celery import QueueOnce, AlreadyQueued

    app.conf.ONCE = {"settings": {"url": "redis://localhost:6379/0", "default_timeout": 3600}}

    @app.task(base=QueueOnce, once={"keys": ["user_id"], "graceful": True})
    def sync_user(user_id): ...

``apply_async`` (and ``delay``) takes a lock named after the task and its arguments (all of
them, or only ``once["keys"]``; celery-once's key, see :func:`queue_once_key`) for
``timeout`` seconds; if it is taken, the task is queued already (or running):
:class:`~redlease.errors.AlreadyQueued` is raised, or, when ``graceful``, a result in state
``REJECTED`` whose ``get()`` is ``None`` is returned (celery-once's answer, so code written for it
keeps
working). ``app.send_task(...)`` bypasses ``apply_async``: nothing is deduplicated, and the
task runs without a lock.

Unlike celery-once, the lock does not sit for ``timeout`` once a worker has the task: its lease
is handed to the worker in the message (``Lock.detach()``, a header), which adopts it on a short
lease (``once["ttl"]``, default 10 s) renewed while the task runs and released when it ends,
success or failure. A worker killed mid-task frees the task within that short lease. The lease
is adopted once: a copy of the message the broker delivers again while the first runs
(``acks_late``, ``visibility_timeout``) is ignored (Celery's ``Ignore``), never run beside it.
The task sees the lock's fencing token as ``self.request.redlease_fence`` (``bind=True``;
``None`` without a lock: a direct call, ``apply()``, ``send_task``). Every key expires.

Options, per task (``once={...}``; ``graceful``, ``timeout`` and ``keep_on_retry`` also per
call, ``apply_async(once={...})``): ``keys`` (argument names in the key; default all;
``restrict_to`` is its old name), ``graceful`` (the ``REJECTED`` result instead of
:class:`~redlease.errors.AlreadyQueued`), ``timeout`` (seconds the lock lasts while queued; default
``settings["default_timeout"]``, else 3600), ``unlock_before_run`` (free the lock when the task
starts rather than when it ends), ``ttl`` (the running lease), ``keep_on_retry`` (a retry
takes the running copy's lock along, so the key stays held through its countdown; default:
freed, as celery-once does), ``return_existing`` (set it on the task: a duplicate returns
the ``AsyncResult`` of the copy queued or running, as celery-singleton does, instead of
:class:`~redlease.errors.AlreadyQueued`; when that copy's id cannot be found, the usual answer).
Settings (``app.conf.ONCE["settings"]``): ``url`` or ``client``
(a redis-py client), ``default_timeout``, ``default_ttl``, ``prefix``. Needs the extra
``redlease[celery]``.
"""

from __future__ import annotations

import logging
import os
import uuid
from datetime import datetime
from inspect import signature
from typing import Any, ClassVar

import redis
from celery import Task, states
from celery.exceptions import Ignore
from celery.result import EagerResult

from ._core import validate
from ._core.lock import LockKeys
from ._sync.lock import Lock
from .errors import AlreadyAdopted, AlreadyQueued, LockLost, LockUnavailable, RedleaseError

__all__ = ["HEADER", "AlreadyQueued", "QueueOnce", "queue_once_key"]

HEADER = "redlease_lease"
"""The message header that carries the detached lease from ``apply_async`` to the worker."""

_log = logging.getLogger("redlease.celery")
_clients: dict[tuple[str, int], redis.Redis] = {}  # by (url, pid): a forked worker makes its own


def queue_once_key(
    name: str,
    arguments: dict[str, Any],
    keys: list[str] | None = None,
    *,
    restrict_to: list[str] | None = None,
) -> str:
    """celery-once's key: ``qo_<task name>_<arg>-<value>...``, arguments sorted by name, dict
    values sorted by key at every depth (``{"a": 1, "b": 2}`` and ``{"b": 2, "a": 1}`` are
    one key), as celery-once's ``queue_once_key`` builds it. ``restrict_to`` is the old name
    of ``keys``; ``TypeError`` if both are given and differ."""
    if restrict_to is not None:
        if keys is not None and list(keys) != list(restrict_to):
            raise TypeError("give keys or restrict_to (its old name), not both")
        keys = restrict_to
    chosen = arguments if keys is None else {key: arguments[key] for key in keys}
    parts = [f"{key}-{_canonical(value)}" for key, value in _by_key(chosen)]
    return "_".join(["qo", name, *parts])


def _canonical(value: Any) -> Any:
    """celery-once's ``force_string``: a dict becomes the str of its items sorted by key (its
    keys and values made canonical first), a list's elements are made canonical; anything
    else is left as it is (and written with ``str``)."""
    if isinstance(value, dict):
        items = ((_canonical(k), _canonical(v)) for k, v in _by_key(value))
        return "{" + ", ".join(str({k: v}).strip("{}") for k, v in items) + "}"
    if isinstance(value, list):
        return [_canonical(element) for element in value]
    return value


def _by_key(mapping: dict[Any, Any]) -> list[tuple[Any, Any]]:
    """The items of ``mapping`` sorted by key; keys of mixed types (which celery-once cannot
    sort) by type name, then ``repr``."""
    try:
        return sorted(mapping.items(), key=lambda kv: kv[0])
    except TypeError:
        return sorted(mapping.items(), key=lambda kv: (type(kv[0]).__name__, repr(kv[0])))


class QueueOnce(Task):  # type: ignore[misc]
    """A task base class: at most one queued or running copy per key (see the module)."""

    abstract = True
    once: ClassVar[dict[str, Any]] = {"graceful": False, "unlock_before_run": False}

    # -- configuration ----------------------------------------------------------------------
    @property
    def once_settings(self) -> dict[str, Any]:
        """``app.conf.ONCE["settings"]``."""
        settings: dict[str, Any] = (self._get_app().conf.get("ONCE") or {}).get("settings", {})
        return settings

    @property
    def once_client(self) -> redis.Redis:
        """The redis-py client of ``settings["client"]``, else one for ``settings["url"]``."""
        settings = self.once_settings
        if settings.get("client") is not None:
            client: redis.Redis = settings["client"]
            return client
        url = settings.get("url")
        if not url:
            raise ValueError('app.conf.ONCE["settings"] needs "url" or "client"')
        key = (url, os.getpid())
        if key not in _clients:
            _clients[key] = redis.Redis.from_url(url)
        return _clients[key]

    def _option(self, options: dict[str, Any], name: str, default: Any) -> Any:
        return options.get(name, self.once.get(name, default))

    def get_key(self, args: Any = None, kwargs: Any = None) -> str:
        """The lock's name for a call with ``args`` and ``kwargs`` (celery-once's key).

        ``ValueError`` naming ``keys`` if one of ``once["keys"]`` (or ``once["restrict_to"]``,
        its old name) is not an argument of the task.
        """
        bound = signature(self.run).bind(*(args or ()), **(kwargs or {}))
        bound.apply_defaults()  # f(1) and f(1, full=False) are one call: one key
        arguments = dict(bound.arguments)
        if isinstance(arguments.get("self"), Task):
            del arguments["self"]  # bind=True: the task itself is no argument
        keys, old = self.once.get("keys"), self.once.get("restrict_to")
        missing = [key for key in (keys or old or ()) if key not in arguments]
        if missing:
            raise ValueError(f"keys must name arguments of {self.name}, got {missing!r}")
        return queue_once_key(self.name, arguments, keys, restrict_to=old)

    def _id_key(self, lock: Lock) -> str:
        """Where the id of the copy holding ``lock`` is kept (``return_existing``): beside the
        lock's keys, in its slot."""
        prefix = self.once_settings.get("prefix", "redlease")
        return f"{prefix}:{{{lock.name}}}:celery-task"

    def _lock(self, key: str, ttl: float, *, renew: bool = False) -> Lock:
        prefix = self.once_settings.get("prefix", "redlease")
        return Lock(self.once_client, key, ttl=ttl, prefix=prefix, renew=renew, on_lost=self._lost)

    # -- the producer -----------------------------------------------------------------------
    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """Queue the task unless a copy with the same key is queued or running.

        Raises :class:`~redlease.errors.AlreadyQueued` if it is, or when ``graceful`` returns an
        ``EagerResult`` in state ``REJECTED`` (its ``get()`` is ``None``). A retry
        (``options["retries"]``) is
        queued as it is; with ``keep_on_retry`` it carries the running copy's lock along.
        """
        once = options.pop("once", None) or {}
        timeout = self._timeout(once)
        if options.get("retries"):
            token = self._keep_for_retry(once, timeout, options)
            if token is None:
                return super().apply_async(args, kwargs, **options)
            return self._send(args, kwargs, options, token)
        validate.lease_ms(self._ttl(), "ttl")
        lock = self._lock(self.get_key(args, kwargs), timeout)
        existing = self._option(once, "return_existing", False)
        if not lock.acquire(blocking=False):
            found = self._existing_id(lock) if existing else None
            if found is not None:  # the copy queued or running: its result
                return self.AsyncResult(found)
            if self._option(once, "graceful", False):
                return EagerResult(None, None, states.REJECTED)
            raise AlreadyQueued(lock.inspect().remaining or 0.0, name=lock.name)
        self._expire_counter(lock, timeout)
        if existing:  # the id the duplicates will be answered with, for as long as queued
            options["task_id"] = options.get("task_id") or str(uuid.uuid4())
            self._keep_id(lock, options["task_id"], timeout)
        return self._send(args, kwargs, options, lock.detach())

    def _existing_id(self, lock: Lock) -> str | None:
        try:
            found = self.once_client.get(self._id_key(lock))
        except redis.RedisError as exc:
            raise LockUnavailable(f"could not read the task id of {lock.name!r}") from exc
        if found is None:
            return None
        return found.decode() if isinstance(found, bytes) else str(found)

    def _keep_id(self, lock: Lock, task_id: str, timeout: float) -> None:
        ms = validate.lease_ms(timeout, "timeout")
        try:
            self.once_client.set(self._id_key(lock), task_id, px=ms)
        except redis.RedisError as exc:
            _release(lock)  # not queued: nothing is left held
            raise LockUnavailable(f"could not keep the task id of {lock.name!r}") from exc

    def _send(self, args: Any, kwargs: Any, options: dict[str, Any], token: str) -> Any:
        """Queue the message with the detached lock ``token`` in its headers."""
        options["headers"] = {**(options.get("headers") or {}), HEADER: token}
        try:
            return super().apply_async(args, kwargs, **options)
        except BaseException:
            try:  # not queued: free the key
                Lock.adopt(self.once_client, token).release()
            except RedleaseError as exc:  # Redis failed too: the key frees itself after timeout
                _log.warning("could not free the lock of task %s: %s", self.name, exc)
            raise

    def _keep_for_retry(
        self, once: dict[str, Any], timeout: float, options: dict[str, Any]
    ) -> str | None:
        """With ``keep_on_retry``, from inside the running task: hand its lock to the retry
        (leased for the countdown plus ``timeout``, as a queued task's is); else ``None``."""
        running: _Running | None = getattr(self.request, "redlease_running", None)
        if not self._option(once, "keep_on_retry", False) or running is None:
            return None
        lock, running.lock = running.lock, None
        if lock is None:
            return None
        try:
            lock.extend(timeout + _delay(options))
            return lock.detach()
        except RedleaseError as exc:  # lost, or Redis failed: the retry takes the key afresh
            _log.warning("task %s could not keep its lock for its retry: %s", self.name, exc)
            return None

    def _expire_counter(self, lock: Lock, seconds: float) -> None:
        """A Lock keeps its fence counter for good, here one key per argument tuple: make it
        last ``seconds``. Fences stay increasing without it: each is at least the server's
        time in microseconds (``lua/common_lib.lua``)."""
        prefix = validate.prefix(self.once_settings.get("prefix", "redlease"))
        counter = LockKeys.build(prefix, validate.name(lock.name)).fence
        try:
            self.once_client.pexpire(counter, validate.lease_ms(seconds, "timeout"))
        except redis.RedisError as exc:  # the key only outlives its use
            _log.warning("could not set the expiry of %r: %s", counter, exc)

    # -- the worker -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task holding its lock: adopted on the short lease, released at the end."""
        if self._token() is None:  # called directly, apply(), send_task(): no lock, no fence
            if getattr(self.request, "redlease_fence", None) is None:
                self.request.redlease_fence = None
            return super().__call__(*args, **kwargs)
        lock = self._adopt(args, kwargs)
        if lock is None:
            return None
        running = _Running(lock)
        self.request.redlease_fence = lock.fence
        self.request.redlease_running = running
        if self.once.get("unlock_before_run", False):
            running.lock = None
            self._forget_id(lock)
            _release(lock)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            if running.lock is not None:  # (a retry with keep_on_retry took it over)
                self._forget_id(running.lock)
                _release(running.lock)

    def _adopt(self, args: Any, kwargs: Any) -> Lock | None:
        """The lock the message hands over, adopted once; ``Ignore`` when a copy of the same
        message runs already; ``None`` when a copy queued since holds the key."""
        ttl = self._ttl()
        try:
            return Lock.adopt(self.once_client, self._token() or "", ttl=ttl, on_lost=self._lost)
        except AlreadyAdopted as exc:
            # A redelivered message (visibility_timeout, acks_late) while its first copy
            # runs: never beside it. Ignore: acknowledged, and no result over the first's.
            _log.warning(
                "task %s[%s] not run: a copy of its message is running (%s)",
                self.name,
                self.request.id,
                exc,
            )
            raise Ignore() from exc
        except LockLost:
            # Queued longer than its timeout, or a redelivered copy after the first ended or
            # died: take the key afresh, unless a copy queued since holds it (that one runs).
            lock = self._lock(self.get_key(args, kwargs), ttl, renew=True)
            if not lock.acquire(blocking=False):
                _log.warning("task %s skipped: a copy queued since holds its key", self.name)
                return None
            self._expire_counter(lock, self._timeout({}))
            return lock

    def _forget_id(self, lock: Lock) -> None:
        """Before the key is freed: duplicates are no longer answered with this copy's id."""
        if not self.once.get("return_existing", False):
            return
        try:
            self.once_client.delete(self._id_key(lock))
        except redis.RedisError as exc:  # it expires with the queued timeout
            _log.warning("could not forget the task id of %r: %s", lock.name, exc)

    def push_request(self, *args: Any, **kwargs: Any) -> None:
        """Keep ``redlease_fence`` (``None`` without a lock) and the running lock in the
        request ``Task.__call__`` pushes for the run: celery 5.5+ copies the outer request
        into it, 5.3-5.4 start it empty (seen in eager tasks)."""
        outer = self.request
        super().push_request(*args, **kwargs)
        for name in ("redlease_fence", "redlease_running"):
            if getattr(self.request, name, None) is None:
                setattr(self.request, name, getattr(outer, name, None))

    def _timeout(self, once: dict[str, Any]) -> float:
        timeout = self._option(once, "timeout", self.once_settings.get("default_timeout", 3600))
        validate.lease_ms(timeout, "timeout")
        return float(timeout)

    def _ttl(self) -> float:
        ttl: float = self.once.get("ttl", self.once_settings.get("default_ttl", 10.0))
        return ttl

    def _token(self) -> str | None:
        request = self.request
        token = getattr(request, HEADER, None)
        if token is None:
            token = (getattr(request, "headers", None) or {}).get(HEADER)
        return token if isinstance(token, str) else None

    def _lost(self) -> None:
        _log.warning("task %s lost its lock while running (Redis unreachable?)", self.name)


class _Running:
    """The lock a run holds, shared by the requests of the run (a retry may take it over)."""

    __slots__ = ("lock",)

    def __init__(self, lock: Lock | None) -> None:
        self.lock = lock


def _delay(options: dict[str, Any]) -> float:
    """Seconds until a retry runs: its ``countdown``, or until its ``eta``; else 0."""
    countdown, eta = options.get("countdown"), options.get("eta")
    if isinstance(countdown, (int, float)) and not isinstance(countdown, bool):
        return max(float(countdown), 0.0)
    if isinstance(eta, datetime):
        now = datetime.now(eta.tzinfo) if eta.tzinfo else datetime.now()
        return max((eta - now).total_seconds(), 0.0)
    return 0.0


def _release(lock: Lock) -> None:
    try:
        lock.release()
    except RedleaseError as exc:  # lost or Redis down: it frees itself within its lease
        _log.warning("could not release the lock of %r: %s", lock.name, exc)
