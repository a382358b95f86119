"""Once: at most one run per period for a name, on the server's clock (``_core/once.py``)."""

from __future__ import annotations

import contextlib
import datetime
import functools
import socket
import time
from collections.abc import Callable, Hashable
from types import TracebackType
from typing import ParamSpec, TypeVar

import redis.asyncio
from redis.exceptions import RedisError

from .. import _observe
from .._core import breakglass, validate
from .._core import once as core
from .._core.holder import name_of
from .._core.lease import Holding, new_token, pid
from .._core.once import OnceInfo, OnceReleased
from .._core.scripts import Script
from .._synchronization import AsyncBackground, AsyncFunction
from ..errors import OnceUnavailable, RunLost
from .flavor import check_client
from .primitive import AsyncPrimitive

__all__ = ["AsyncOnce", "AsyncOnceRun"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class AsyncOnce(AsyncPrimitive):
    """At most one run per period for ``name``, across processes and hosts.

    ``Once(client, "nightly-report", every="24h")``: :meth:`try_start` starts a run and
    returns it (an :class:`OnceRun`), or returns ``None`` when a run is in progress elsewhere or
    a run that succeeded started less than ``every`` seconds ago, both on the server's clock
    (hosts whose clocks or cron entries disagree by seconds still run the job once).

    A run is a lease of ``ttl`` seconds renewed by the watchdog, with a fencing token
    (``run.fence``, strictly increasing over the runs of a name, even after Redis lost its
    data: see docs/safety.md). ``run.finish()`` records
    success: the name stays taken until the run's start + ``every``. ``run.fail()`` frees it
    at once, so another host may retry; a holder that dies (kill -9, host down) frees it
    within ``ttl``. :meth:`last` tells the last run's state, times, fence and host.

    ``with once as run:`` starts a run for the block (``run`` is ``None`` when skipped: test
    it), records success at the end of the block and failure on an exception (which
    propagates). ``@once`` over a function runs it as such a block and returns ``None`` when
    it skipped; inside, :attr:`run` is the caller's run. A skip is not an error.

    :meth:`force_release` is an operator's way out: it frees a run that hangs, or clears a
    success so that the job may run again now (``redlease release NAME --force``).

    Not guaranteed: a holder paused longer than ``ttl`` (GC, SIGSTOP) may still be working when
    another run starts; pass ``run.fence`` to your storage to reject its late writes.
    """

    _unavailable_error = OnceUnavailable
    _what = "once"

    def __init__(
        self,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        every: float | datetime.timedelta | str,
        ttl: float | datetime.timedelta | str = 10.0,
        prefix: str = "redlease",
        on_lost: Callable[[], object] | None = None,
    ) -> None:
        """Describe a job that runs once per period; nothing is sent to Redis until used.

        :param client: your redis-py client.
        :param name: the job's name (str or bytes); its keys are ``<prefix>:{<name>}:once:run`` and
            ``:once:fence``.
        :param every: the period: seconds, a ``timedelta``, or a duration as ``redlease run
            --every`` takes it (``"90s"``, ``"15m"``, ``"24h"``, ``"7d"``, ``"1h30m"``);
            0 < every <= 400 days. A run that succeeded keeps the name until its start + every.
        :param ttl: the run's lease, written as ``every`` (at least 0.05 s, at most 30 days),
            renewed every ttl/3 while it runs: how long the name stays taken after its holder
            died.
        :param prefix: the key prefix (no white space or braces).
        :param on_lost: called (from the watchdog) when a renewal finds the run's lease gone.
        """
        check_client(client)
        self._client = client
        self.name = name
        self._keys = core.OnceKeys.build(validate.prefix(prefix), validate.name(name))
        self._key = self._keys.run
        self._every_ms = core.every_ms(every)
        self.every = self._every_ms / 1000
        self._ttl_ms = core.lease_ms(ttl)
        self.ttl = self._ttl_ms / 1000
        self._on_lost = validate.on_lost(on_lost, coroutines=AsyncBackground.ASYNC)
        self._label = name if isinstance(name, str) else name.decode("utf-8", "replace")
        self._entered: dict[Hashable, list[AsyncOnceRun | None]] = {}

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name!r} every={self.every} ttl={self.ttl}>"

    # -- break-glass ------------------------------------------------------------------------
    @classmethod
    async def force_release(
        cls,
        client: redis.asyncio.Redis,
        name: str | bytes,
        *,
        prefix: str = "redlease",
        token: str | bytes | None = None,
    ) -> OnceReleased:
        """Break-glass: free ``name`` now, whatever keeps it (only the run with ``token``, as
        ``last().token`` shows it, when given), and move the fence on.

        A run in progress is evicted: its holder's watchdog reports ``on_lost`` at its next
        renewal (within ``ttl / 3``), its ``finish()`` / ``fail()`` raise
        :class:`~redlease.RunLost`, and the next run's fence is larger. A success within its
        period is cleared, so that the job may run again now (after a fix, say). The run is
        left ``"released"`` in :meth:`last`. Nothing is changed when nothing keeps the name
        (``removed`` empty). For an operator (``redlease release NAME --force``); logged as a
        WARNING (``redlease_event`` ``force_released``). Raises
        :class:`~redlease.OnceUnavailable` if Redis fails.
        """
        return await cls(client, name, every=1, prefix=prefix)._force_release(token)

    async def _force_release(self, token: str | bytes | None) -> OnceReleased:
        wanted = breakglass.token(token)
        raw = await self._run(core.FORCE_RELEASE, self._keys.in_order(), [wanted], "force-release")
        result = core.decode_force_release(raw, self.name, self._keys)
        if result.removed:
            tokens = [h.token for h in result.removed]
            _observe.force_released("once", self._label, tokens, result.fence)
        return result

    # -- runs -------------------------------------------------------------------------------
    async def try_start(self) -> AsyncOnceRun | None:
        """Start a run: the run (leased, renewed, fenced), or ``None`` when skipped.

        Skipped: a run is in progress (its lease not run out), or a run that succeeded
        started less than ``every`` seconds ago. Raises :class:`~redlease.OnceUnavailable`
        when Redis fails (never a skip), :class:`~redlease.ForeignData` when the key holds
        data redlease did not write.
        """
        runtime = self._runtime()
        owner = AsyncBackground.owner()
        token = new_token(name_of(owner))  # says who runs it: inspect's "held by"
        args = [token, self._ttl_ms, self._every_ms, socket.gethostname(), pid()]
        sent = time.monotonic()
        raw = await self._run_or_undo(
            lambda: runtime.backend.run(core.START, self._keys.in_order(), args),
            lambda timeout: self._undo(token, timeout),
            "start a run of",
            None,
        )
        start = core.decode_start(raw, self.name, self._keys)
        if start.status != core.STARTED:
            _observe.not_acquired("once", self._label, time.monotonic() - sent)
            return None
        holding = Holding(
            key=self._key,
            token=token,
            fence=start.value,
            owner=owner,
            ttl_ms=self._ttl_ms,
            expires_at=sent + self.ttl,
            on_lost=self._on_lost,
            renew_script=core.RENEW,
            renew_target=runtime.renewal,
            primitive="once",
            name=self._label,
            acquired_at=time.monotonic(),
        )
        holding.renewed = True
        runtime.renewer.add(holding)
        _observe.acquired("once", self._label, time.monotonic() - sent)
        return AsyncOnceRun(self, holding, start.now / 1000)

    async def last(self) -> OnceInfo | None:
        """The last run (``None``: none ever started), read atomically in one round trip."""
        raw = await self._run(core.INSPECT, [self._key], [], "inspect")
        return core.decode_inspect(raw, self.name, self._keys)

    @property
    def run(self) -> AsyncOnceRun | None:
        """The caller's run inside ``with once`` or a function decorated with ``@once``."""
        stack = self._entered.get(AsyncBackground.owner())
        return stack[-1] if stack else None

    # -- with and @ -------------------------------------------------------------------------
    async def __aenter__(self) -> AsyncOnceRun | None:
        run = await self.try_start()
        self._entered.setdefault(AsyncBackground.owner(), []).append(run)
        return run

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        owner = AsyncBackground.owner()
        stack = self._entered[owner]
        run = stack.pop()
        if not stack:
            del self._entered[owner]
        if run is None or not run.active:
            return
        if exc is None:
            await run.finish()
            return
        # The block's own error says more; the name is free, or frees within ttl.
        with contextlib.suppress(RunLost, OnceUnavailable):
            await run.fail()

    def __call__(self, func: AsyncFunction[_P, _R]) -> AsyncFunction[_P, _R | None]:
        """Decorate ``func``: each call runs it as a run of this Once, or returns ``None``
        when the run is skipped. An exception marks the run failed and propagates."""
        validate.decorated(func, "Once", coroutine=AsyncBackground.ASYNC)

        @functools.wraps(func)
        async def once(*args: _P.args, **kwargs: _P.kwargs) -> _R | None:
            async with self as run:
                if run is None:
                    return None
                return await func(*args, **kwargs)

        return once

    # -- plumbing ---------------------------------------------------------------------------
    async def _call(self, script: Script, token: bytes, timeout: float | None = None) -> bool:
        raw = await self._runtime().backend.run(script, [self._key], [token], timeout)
        return core.decode_finish(raw)[0]

    async def _undo(self, token: bytes, timeout: float | None) -> None:
        await self._call(core.FAIL, token, timeout)

    async def _end_run(self, holding: Holding, script: Script, action: str) -> bool:
        """Run ``script`` to end a run; False if its lease was lost first."""
        if not self._runtime().renewer.release(holding):
            return False
        try:
            recorded = await self._call(script, holding.token)
        except RedisError as exc:
            _observe.error("once", holding.name, action, exc)
            raise self._unavailable(action + " a run of", exc) from exc
        if not recorded:
            holding.lost = True
            _observe.lost(holding, action)
            return False
        _observe.released(holding, time.monotonic() - holding.acquired_at)
        return True


class AsyncOnceRun:
    """One run of a :class:`Once`: ``fence``, ``started`` (server time, seconds since the
    epoch), and :meth:`finish` or :meth:`fail` to end it."""

    def __init__(self, once: AsyncOnce, holding: Holding, started: float) -> None:
        self.once = once
        self.name = once.name
        self.fence = holding.fence
        self.started = started
        self._holding = holding
        self._ended = False

    def __repr__(self) -> str:
        state = "ended" if self._ended else "running"
        return f"<{type(self).__name__} {self.name!r} fence={self.fence} {state}>"

    @property
    def active(self) -> bool:
        """Neither ended nor known to be lost (the watchdog found its lease gone)."""
        return not self._ended and self._holding.active

    async def finish(self) -> None:
        """Record success: the name stays taken until this run's start + ``every``.

        Raises :class:`~redlease.RunLost` if the run's lease ran out first (nothing is
        recorded: another run may have started), :class:`~redlease.OnceUnavailable` if Redis
        failed (the lease then runs out within ``ttl`` and the name is free again).
        """
        await self._end(core.FINISH, "finish")

    async def fail(self) -> None:
        """Record failure: the name is free at once, so another host may retry.

        Raises like :meth:`finish`.
        """
        await self._end(core.FAIL, "fail")

    async def _end(self, script: Script, action: str) -> None:
        if self._ended:
            raise RuntimeError(f"run {self.fence} of once {self.name!r} has ended already")
        self._ended = True
        if not await self.once._end_run(self._holding, script, action):
            raise self._lost(action)

    def _lost(self, action: str) -> RunLost:
        return RunLost(
            f"cannot {action} run {self.fence} of once {self.name!r}: its lease ran out "
            "first (another run may have started)",
            name=self.name,
        )
