"""What every primitive's shell does the same way: find its runtime, run a script, wait.

:class:`AsyncPrimitive` holds the client and finds its runtime; :meth:`~AsyncPrimitive._run`
runs one script and turns a Redis failure into the primitive's ``*Unavailable`` error (the
error table: ``_unavailable_error`` and ``_what``, which each primitive declares);
:meth:`~AsyncPrimitive._run_or_undo` also gives back what a lost reply may have taken; and
:meth:`~AsyncPrimitive._wait_turn` waits on one server's hub.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import redis.asyncio
from redis.exceptions import ConnectionError, RedisError, TimeoutError

from .._core.bounds import budget
from .._core.scripts import Script
from .._core.waiters import Grantee
from .._synchronization import AsyncShield
from ..errors import Unavailable
from .hub import AsyncHub
from .runtime import AsyncRuntime, runtime_for
from .waiting import Attempt, Leave, wait_turn

__all__ = ["AsyncPrimitive"]


class AsyncPrimitive:
    """The base of a primitive's shell. Not used directly."""

    _client: redis.asyncio.Redis
    name: Any
    # The error table: what a Redis failure raises, and how its message calls the primitive.
    _unavailable_error: type[Unavailable] = Unavailable
    _what = "primitive"

    def _runtime(self) -> AsyncRuntime:
        """The runtime (backend, hubs, watchdog) of this primitive's client."""
        return runtime_for(self._client)

    # -- errors -----------------------------------------------------------------------------
    def _subject(self) -> tuple[str, Any]:
        """How an error names this primitive: the words of its message, and its ``name``."""
        return f"{self._what} {self.name!r}", self.name

    def _unavailable(self, action: str, exc: BaseException) -> Unavailable:
        words, name = self._subject()
        return self._unavailable_error(
            f"could not {action} {words}: Redis failed: {exc}", name=name
        )

    def _listen_error(self, server: int, exc: RedisError) -> None:
        raise self._unavailable("wait for", exc) from exc

    # -- the conversation with Redis --------------------------------------------------------
    async def _run(
        self,
        script: Script,
        keys: list[bytes],
        args: list[Any],
        action: str,
        timeout: float | None = None,
    ) -> Any:
        """Run ``script``; a Redis failure raises the primitive's error, naming ``action``."""
        try:
            return await self._runtime().backend.run(script, keys, args, timeout)
        except RedisError as exc:
            raise self._unavailable(action, exc) from exc

    async def _run_or_undo(
        self,
        send: Callable[[], Any],
        undo: Callable[[float | None], Any],
        action: str,
        deadline: float | None,
    ) -> Any:
        """The reply of ``send()``, a call that may take something for the caller.

        When its reply is lost (the script may have run) ``undo(timeout)`` gives back what may
        be ours, within what is left of the call's bound; when the caller is cancelled or
        interrupted, it does so in the background.
        """
        try:
            return await send()
        except BaseException as exc:
            error = await self._undo_after(exc, undo, action, deadline)
            if error is None:
                raise
            raise error from exc

    async def _undo_after(
        self,
        exc: BaseException,
        undo: Callable[[float | None], Any],
        action: str,
        deadline: float | None,
    ) -> Unavailable | None:
        """After a call that may have taken something for the caller failed with ``exc``:
        ``undo(timeout)`` gives it back (see :meth:`_run_or_undo`); the error to raise
        (``None``: ``exc`` itself, the caller cancelled or interrupted)."""
        if isinstance(exc, (ConnectionError, TimeoutError)):
            left = budget(deadline, self._runtime().backend.socket_timeout, time.monotonic())
            await AsyncShield.cleanup(undo, left)
            return self._unavailable(action, exc)
        if isinstance(exc, RedisError):
            return self._unavailable(action, exc)
        AsyncShield.background(undo)
        return None

    async def _wait_turn(
        self,
        hub: AsyncHub,
        token: bytes,
        attempt: Attempt,
        leave: Leave,
        *,
        deadline: float | None,
        fallback: float,
        grantee: Grantee | None = None,
    ) -> Any:
        """:func:`~redlease._async.waiting.wait_turn` on one server: a failure to listen
        raises the primitive's error."""
        return await wait_turn(
            [hub],
            token,
            attempt,
            leave,
            deadline=deadline,
            socket_timeout=self._runtime().backend.socket_timeout,
            fallback=fallback,
            listen_error=self._listen_error,
            grantee=grantee,
        )
