"""A Redlock's N servers: what its rounds use of their runtimes, one round over them, and the
check that no server was given twice."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from .._core import redlock as core
from .._core.redlock_argv import Argv
from .._core.scripts import Script
from .._fanout import AsyncFanOut, hung
from .._synchronization import AsyncBackground
from .one_server import AsyncBackend
from .redlock_renewal import AsyncQuorumRenewal
from .runtime import AsyncRuntime, runtime_for

__all__ = ["AsyncRedlockServers"]


@dataclass(frozen=True)
class _Current:
    """What a Redlock's rounds use of its clients' runtimes, while current."""

    runtimes: tuple[AsyncRuntime, ...]
    backends: tuple[AsyncBackend, ...]
    renewal: AsyncQuorumRenewal


class AsyncRedlockServers:
    """The servers of one Redlock (``clients``, one per server, checked by the caller)."""

    def __init__(
        self, clients: list[Any], quorum: int, drift_factor: float, server_timeout: float
    ) -> None:
        self.clients = clients
        self.quorum = quorum
        self.drift_factor = drift_factor
        self.server_timeout = server_timeout
        self._tellers = core.tellers(len(clients))
        self._identified: dict[int, tuple[str, int]] = {}  # server -> (run_id, db)
        self._current: _Current | None = None

    def current(self) -> _Current:
        """The clients' runtimes and what rounds use of them, kept while they are current
        (none closed, same process or event loop): looked up once, not on every round."""
        current = self._current
        if current is not None:
            scope = AsyncBackground.scope()
            for rt in current.runtimes:  # (a loop, not all(): this runs on every round)
                if rt.scope != scope or rt.closed:
                    break
            else:
                return current
        runtimes = tuple(runtime_for(c) for c in self.clients)
        # Each round is bounded by ``server_timeout`` by the fan-out, while a connection's own
        # reads may take ``SLACK`` more (asyncio), so that a late reply is collected (and
        # whatever was sent behind it read), not its connection closed.
        timeout = self.server_timeout + AsyncFanOut.SLACK
        # (one server each: a cluster client was refused by the Redlock)
        backends = tuple(cast(AsyncBackend, rt.backend.with_deadline(timeout)) for rt in runtimes)
        renewal = AsyncQuorumRenewal(backends, self.quorum, self.drift_factor, self.server_timeout)
        self._current = _Current(runtimes, backends, renewal)
        return self._current

    def runtimes(self) -> tuple[AsyncRuntime, ...]:
        return self.current().runtimes

    def backends(self) -> tuple[AsyncBackend, ...]:
        """The servers for rounds (see :meth:`current`)."""
        return self.current().backends

    async def round(
        self,
        script: Script,
        keys: list[bytes],
        args: Argv | list[Any],
        servers: Sequence[int] = (),
        *,
        enough: Callable[[list[Any]], bool] | None = None,
        hold: bool = False,
    ) -> list[Any]:
        """Run ``script`` on the given servers (default: all) at once; replies or exceptions
        per server (:class:`~redlease._fanout.Late` for a reply not read yet: ``enough``,
        asked only of a round over all servers, let it return, or the server's deadline
        passed). An :class:`Argv` goes quiet to all but the tellers in a round over all
        servers, and told to every server in a round over some."""
        backends = self.backends()
        if servers:  # (rounds over some of the servers read them all)
            told = args.told if isinstance(args, Argv) else args
            replies = await AsyncFanOut.run(
                [(backends[i], script, keys, told) for i in servers],
                self.server_timeout,
                hold=hold,
            )
            out: list[Any] = [None] * len(backends)
            for i, reply in zip(servers, replies, strict=True):
                out[i] = reply
            return out
        if isinstance(args, Argv):
            tellers, told, quiet = self._tellers, args.told, args.quiet
            calls = [
                (backend, script, keys, told if i < tellers else quiet)
                for i, backend in enumerate(backends)
            ]
        else:
            calls = [(backend, script, keys, args) for backend in backends]
        return await AsyncFanOut.run(calls, self.server_timeout, enough, hold=hold)

    async def check(self) -> None:
        """Refuse one server given twice (by its run_id and database), once all answered.

        A server known not to answer is asked once it answers a round again (see
        :func:`~redlease._fanout.hung`): asked before every acquire, it would cost each one
        a deadline while it hangs."""
        missing = [i for i in range(len(self.clients)) if i not in self._identified]
        if not missing:
            return
        backends = [rt.backend.with_deadline(self.server_timeout) for rt in self.runtimes()]
        missing = [i for i in missing if not hung(backends[i])]

        async def identify(i: int) -> tuple[str, int]:
            return await backends[i].identify()

        for i, found in zip(missing, await AsyncFanOut.gather(identify, missing), strict=True):
            if not isinstance(found, BaseException):
                self._identified[i] = found
        core.check_distinct(self._identified)
