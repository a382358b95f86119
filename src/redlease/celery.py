"""Celery tasks enqueued once, as celery-once users know them, with leases that follow the task.

::

    from redlease.celery import QueueOnce, AlreadyQueued

    app.conf.ONCE = {"settings": {"url": "redis://localhost:6379/0", "default_timeout": 3600}}

    @app.task(base=QueueOnce, once={"keys": ["user_id"], "graceful": True})
    def sync_user(user_id): ...

``apply_async`` (and ``delay``) takes a lock named after the task and its arguments (all of
them, or only ``once["keys"]``) for ``timeout`` seconds; if it is taken, the task is queued
already (or running): :class:`AlreadyQueued` is raised, or, when ``graceful``, a result in
state ``REJECTED`` whose ``get()`` is ``None`` is returned (celery-once's answer, so code
written for it keeps working).

Unlike celery-once, the lock does not sit for ``timeout`` once a worker has the task: its lease
is handed to the worker in the message (``Lock.detach()``, a header), which adopts it on a short
lease (``once["ttl"]``, default 10 s) renewed while the task runs and released when it ends,
success or failure. A worker killed mid-task frees the task within that short lease. The task
sees the lock's fencing token as ``self.request.redlease_fence`` (``bind=True``).

Options, per task (``once={...}``; ``graceful`` and ``timeout`` also per call,
``apply_async(once={...})``): ``keys``
(argument names in the key; default all), ``graceful`` (the ``REJECTED`` result instead of
:class:`AlreadyQueued`), ``timeout`` (seconds the lock lasts while queued; default
``settings["default_timeout"]``, else 3600), ``unlock_before_run`` (free the lock when the task
starts rather than when it ends), ``ttl`` (the running lease). Settings (``app.conf.ONCE
["settings"]``): ``url`` or ``client`` (a redis-py client), ``default_timeout``,
``default_ttl``, ``prefix``. Needs the extra ``redlease[celery]``.
"""

from __future__ import annotations

import logging
import os
from inspect import signature
from typing import Any, ClassVar

import redis
from celery import Task, states
from celery.result import EagerResult

from ._core import validate
from ._sync.lock import Lock
from .errors import LockLost, RedleaseError

__all__ = ["HEADER", "AlreadyQueued", "QueueOnce", "queue_once_key"]

HEADER = "redlease_lease"
"""The message header that carries the detached lease from ``apply_async`` to the worker."""

_log = logging.getLogger("redlease.celery")
_clients: dict[tuple[str, int], redis.Redis] = {}  # by (url, pid): a forked worker makes its own


class AlreadyQueued(RedleaseError):
    """The task is queued (or running) with the same key; ``countdown``: seconds its lock has
    left (celery-once's exception, with the same attributes)."""

    def __init__(self, countdown: float, *, name: str | bytes | None = None) -> None:
        self.message = f"Expires in {countdown:g} seconds"
        self.countdown = countdown
        super().__init__(self.message, name=name)


def queue_once_key(name: str, arguments: dict[str, Any], keys: list[str] | None = None) -> str:
    """celery-once's key: ``qo_<task name>_<arg>-<value>...``, arguments sorted by name."""
    chosen = arguments if keys is None else {key: arguments[key] for key in keys}
    parts = [f"{key}-{value}" for key, value in sorted(chosen.items(), key=lambda kv: str(kv[0]))]
    return "_".join(["qo", name, *parts])


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

        ``ValueError`` naming ``keys`` if one of ``once["keys"]`` is not an argument of the task.
        """
        bound = signature(self.run).bind(*(args or ()), **(kwargs or {}))
        bound.apply_defaults()  # f(1) and f(1, full=False) are one call: one key
        arguments = dict(bound.arguments)
        if isinstance(arguments.get("self"), Task):
            del arguments["self"]  # bind=True: the task itself is no argument
        keys = self.once.get("keys")
        missing = [key for key in keys or () if key not in arguments]
        if missing:
            raise ValueError(f"keys must name arguments of {self.name}, got {missing!r}")
        return queue_once_key(self.name, arguments, keys)

    def _lock(self, key: str, ttl: float, *, renew: bool = False) -> Lock:
        prefix = self.once_settings.get("prefix", "redlease")
        return Lock(self.once_client, key, ttl=ttl, prefix=prefix, renew=renew, on_lost=self._lost)

    # -- the producer -----------------------------------------------------------------------
    def apply_async(self, args: Any = None, kwargs: Any = None, **options: Any) -> Any:
        """Queue the task unless a copy with the same key is queued or running.

        Raises :class:`AlreadyQueued` if it is, or when ``graceful`` returns an ``EagerResult``
        in state ``REJECTED`` (its ``get()`` is ``None``); a retry (``options["retries"]``) is
        queued as it is.
        """
        once = options.pop("once", None) or {}
        if options.get("retries"):
            return super().apply_async(args, kwargs, **options)
        timeout = self._option(once, "timeout", self.once_settings.get("default_timeout", 3600))
        validate.lease_ms(timeout, "timeout")
        validate.lease_ms(self._ttl(), "ttl")
        lock = self._lock(self.get_key(args, kwargs), timeout)
        if not lock.acquire(blocking=False):
            if self._option(once, "graceful", False):
                return EagerResult(None, None, states.REJECTED)
            raise AlreadyQueued(lock.inspect().remaining or 0.0, name=lock.name)
        token = lock.detach()
        options["headers"] = {**(options.get("headers") or {}), HEADER: token}
        try:
            return super().apply_async(args, kwargs, **options)
        except BaseException:
            try:  # not queued: free the key
                Lock.adopt(self.once_client, token).release()
            except RedleaseError as exc:  # Redis failed too: the key frees itself after timeout
                _log.warning("could not free the lock of %r: %s", lock.name, exc)
            raise

    # -- the worker -------------------------------------------------------------------------
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the task holding its lock: adopted on the short lease, released at the end."""
        token = self._token()
        if token is None:  # called directly, or queued without apply_async
            return super().__call__(*args, **kwargs)
        ttl = self._ttl()
        try:
            lock = Lock.adopt(self.once_client, token, ttl=ttl, on_lost=self._lost)
        except LockLost:
            # Queued longer than its timeout: the lock ran out. Take it afresh, unless a copy
            # queued since holds it (that copy runs instead).
            lock = self._lock(self.get_key(args, kwargs), ttl, renew=True)
            if not lock.acquire(blocking=False):
                _log.warning("task %s skipped: a copy queued since holds its key", self.name)
                return None
        self.request.redlease_fence = lock.fence
        if self.once.get("unlock_before_run", False):
            _release(lock)
            return super().__call__(*args, **kwargs)
        try:
            return super().__call__(*args, **kwargs)
        finally:
            _release(lock)

    def push_request(self, *args: Any, **kwargs: Any) -> None:
        """Keep ``redlease_fence`` in the request ``Task.__call__`` pushes for the run: celery
        5.5+ copies the outer request into it, 5.3-5.4 start it empty (seen in eager tasks)."""
        fence = getattr(self.request, "redlease_fence", None)
        super().push_request(*args, **kwargs)
        if fence is not None and getattr(self.request, "redlease_fence", None) is None:
            self.request.redlease_fence = fence

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


def _release(lock: Lock) -> None:
    try:
        lock.release()
    except RedleaseError as exc:  # lost or Redis down: it frees itself within its lease
        _log.warning("could not release the lock of %r: %s", lock.name, exc)
