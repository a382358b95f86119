"""One server: the server interface (``server.py``) over a redis-py/valkey-py client.

A backend wraps the client the user hands in (a standalone server or a Sentinel master) and
offers the few things the primitives need, in the spirit of redsync's ``Pool``: ``run`` is
one EVALSHA (EVAL if the server lost its script cache), no retries, the reply within a
deadline; ``send`` + ``receive`` are the same in two halves, so that a fan-out can write to N
servers before it reads from any; ``behind`` and ``follow`` send behind a reply not read yet.

redlease does not send its scripts through your client's command path: a backend has a
private pool with client-side retries turned off (``connect.py``), whose connections it keeps
between calls (``kept_connections.py``). Errors are redis-py's exception classes, also for valkey-py
clients (``flavor.py`` translates them, the original chained); outages are logged once
(``health.py``). The Redis Cluster adapter (``cluster.py``) implements the same interface
with one backend of this module per node.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from redis.exceptions import ConnectionError, NoScriptError, ResponseError, TimeoutError

from .._core.scripts import Script
from .._redispy_versions import FAST_PACK, AsyncConnections, pack_command
from .commands import run_acknowledged, run_id
from .connect import AsyncEvictionCheck, private_pool
from .flavor import AsyncSubscription, Flavor, address_of, check_client, flavor_of, translate
from .health import ServerHealth
from .kept_connections import AsyncKeeper
from .server import Pending
from .server_renewal import AsyncServerRenewal

__all__ = ["AsyncBackend", "standalone_backend"]

_READ_ONLY = "READONLY You can't write against a read only replica"
"""A replica's refusal. Before Redis 7.0 a script passes it on inside its own error, which
redis-py's Sentinel connection does not recognize (it reconnects on ``ReadOnlyError`` only):
the connection is dropped here, so that a Sentinel client's next one asks for the master."""


def standalone_backend(client: Any, arg: str = "client") -> AsyncBackend:
    """A new backend for ``client``, the client of one server (checked as
    :func:`check_client` does; a cluster client: see ``runtime.backend_for``)."""
    flavor = flavor_of(client)
    if flavor is None:
        check_client(client, arg)
    assert flavor is not None
    return AsyncBackend(client, flavor)


class AsyncBackend:
    """One standalone server (or Sentinel master) reached through a redis-py/valkey-py client."""

    sharded = False
    """Whether waiters are told on sharded channels in each lock's slot (a Cluster) or on one
    channel per process (here: PUBLISH, which every server has)."""

    connect_grace = True
    """Whether opening a connection is kept out of a deadline backend's per-reply deadline
    (:meth:`with_deadline`): its handshake gets the connect timeout, and a fan-out starts a
    call's clock once its connection is open (:meth:`cold`, :meth:`warm`), except on a server
    known not to answer. Off, a fresh Redlock's first round may spend its ``server_timeout``
    connecting."""

    def __init__(
        self,
        client: Any,
        flavor: Flavor,
        timeout: float | None = None,
        root: AsyncBackend | None = None,
    ) -> None:
        self.client = client
        self.identity: tuple[str, int] | None = None  # (run_id, db) once identified
        self._root = root or self
        self._flavor = flavor
        self._timeout = timeout
        self._foreign = flavor.errors  # the client library's own errors: () for redis-py
        # one per server: its maxmemory-policy, read on the first connection's handshake
        self._eviction: AsyncEvictionCheck = (
            AsyncEvictionCheck(self._foreign, self.address) if root is None else root._eviction
        )
        self.keeper = AsyncKeeper(self._private_pool(timeout))  # its connections
        value = self.keeper.pool.connection_kwargs.get("socket_timeout")
        self._socket_timeout = None if value is None else float(value)
        self._deadlines: dict[float, AsyncBackend] = {}
        self.closed = False  # set by redlease.close(): every new call raises ConnectionError
        # one per server: whether it answers, its outages logged
        self._health: ServerHealth = ServerHealth(self.address) if root is None else root._health
        # SHAs this server is known to have cached (an EVALSHA answered without NOSCRIPT):
        # other scripts go as EVAL, so that a reply read late never turns out to be NOSCRIPT
        # (the script would run only when the reply is read, and its resend then).
        self.loaded: set[str] = set()

    def __repr__(self) -> str:
        kwargs = self.client.connection_pool.connection_kwargs
        where = kwargs.get("path") or f"{kwargs.get('host', 'localhost')}:{kwargs.get('port')}"
        return f"<{type(self).__name__} {self._flavor.library} {where} db={kwargs.get('db', 0)}>"

    def _private_pool(self, timeout: float | None) -> Any:
        """A pool like the client's whose connections never retry (``connect.py``)."""
        server = weakref.ref(self._root)
        return private_pool(self.client, self._flavor, timeout, server, self._eviction)

    @property
    def socket_timeout(self) -> float | None:
        """The longest a reply may take here (``None``: no limit)."""
        return self._socket_timeout

    def with_deadline(self, timeout: float) -> AsyncBackend:
        """This server, with every reply (and connect) bounded by ``timeout`` seconds."""
        backend = self._deadlines.get(timeout)
        if backend is None:
            backend = AsyncBackend(self.client, self._flavor, timeout, root=self._root)
            self._deadlines[timeout] = backend
        return backend

    # -- scripts ----------------------------------------------------------------------------
    async def run(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        timeout: float | None = None,
    ) -> Any:
        """EVALSHA ``script`` once (EVAL if the server lost it); its reply.

        ``timeout`` bounds the reply (default, and at most: the socket timeout). Raises
        redis-py's exceptions.
        """
        limit = self._socket_timeout
        if timeout is not None and limit is not None:
            timeout = min(timeout, limit)
        return await self.receive(await self.send(script, keys, args), timeout)

    async def run_acknowledged(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        wait: Sequence[Any],
        wait_timeout: float,
    ) -> tuple[Any, Any]:
        """EVALSHA ``script``, then ``wait`` (``WAIT`` or ``WAITAOF``), pipelined on one
        connection (:func:`~redlease._async.commands.run_acknowledged`): ``(script reply,
        wait reply)``, the wait reply an error reply as its ``ResponseError``. Raises as
        :meth:`run` does."""
        return await run_acknowledged(self, script, keys, args, wait, wait_timeout)

    async def send(
        self,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any = None,
    ) -> Pending:
        """Send EVALSHA ``script`` on a connection of its own; read it with :meth:`receive`.

        ``packed``: the same command already packed by :meth:`pack` (a fan-out packs it once
        for all its servers).
        """
        conn = await self._checkout()
        await self._send_on(conn, script, keys, args, packed, check_health=True)
        return Pending(conn, script, keys, args, time.monotonic())

    async def behind(
        self,
        earlier: Pending,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any = None,
    ) -> Pending:
        """Send EVALSHA ``script`` on the connection of ``earlier``, whose reply is not read
        yet: the server runs it after ``earlier`` (one connection keeps its order), and
        :meth:`receive` of the Pending returned reads (and drops) the earlier replies first."""
        evaled = earlier.evaled
        if earlier.script.sha not in self._root.loaded:  # it went as EVAL
            evaled += (earlier.script,)
        await self._send_on(earlier.conn, script, keys, args, packed, check_health=False)
        before = earlier.before + 1 + earlier.owed
        return Pending(
            earlier.conn, script, keys, args, time.monotonic(), before=before, evaled=evaled
        )

    async def _send_on(
        self,
        conn: Any,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any,
        *,
        check_health: bool,
    ) -> None:
        """Send on ``conn``; if that fails, drop the connection and raise as redis-py's
        errors (a foreign client's translated), noting an outage."""
        try:
            await self._send_script(conn, script, keys, args, packed, check_health=check_health)
        except BaseException as exc:
            await self.keeper.discard(conn)
            if isinstance(exc, self._foreign):
                raise self._failed(translate(exc)) from exc
            if isinstance(exc, (ConnectionError, TimeoutError)):
                self._failed(exc)
            raise

    async def _send_script(
        self,
        conn: Any,
        script: Script,
        keys: Sequence[bytes],
        args: Sequence[Any],
        packed: Any,
        *,
        check_health: bool,
    ) -> None:
        """EVALSHA ``script`` (``packed`` if given) where the server has it, else EVAL."""
        if script.sha not in self._root.loaded:
            await AsyncConnections.send(
                conn, "EVAL", script.source, len(keys), *keys, *args, check_health=check_health
            )
        elif packed is None and not FAST_PACK:
            await AsyncConnections.send(
                conn, "EVALSHA", script.sha, len(keys), *keys, *args, check_health=check_health
            )
        else:  # packed here in one C call (hiredis): the hot path's largest share of Python
            packed = packed or self.pack(script, keys, args)
            await AsyncConnections.write(conn, packed, check_health)

    @staticmethod
    def pack(script: Script, keys: Sequence[bytes], args: Sequence[Any]) -> list[bytes]:
        """EVALSHA ``script`` as the bytes :meth:`send` writes (``packed``). ``args`` are
        bytes, str, int or float: encoded as redis-py encodes them."""
        # One chunk (redis-py writes each chunk of a list).
        return [pack_command(("EVALSHA", script.sha, len(keys), *keys, *args))]

    async def follow(
        self, pending: Pending, script: Script, keys: Sequence[bytes], args: Sequence[Any]
    ) -> bool:
        """Send ``script`` behind ``pending`` on its connection, whose reply is not read yet:
        the server runs it right after the pending script, whenever that runs (also after a
        pause longer than any deadline). EVAL, so that a lost script cache cannot reorder them.

        Its reply is read (and dropped) by :meth:`receive` after the pending one. Returns
        False, sending nothing, when the pending reply was read already (the pending script
        ran: send ``script`` the ordinary way) or the connection is gone.
        """
        if pending.answered or not AsyncConnections.connected(pending.conn):
            return False
        pending.owed += 1
        try:
            await AsyncConnections.send(
                pending.conn, "EVAL", script.source, len(keys), *keys, *args, check_health=False
            )
        except Exception:
            pending.owed -= 1
            return False
        return True

    async def receive(self, pending: Pending, timeout: float | None) -> Any:
        """The reply to ``pending``, within ``timeout`` seconds of sending it (``None``: the
        socket timeout).

        A reply already received is read even when the time is up. If the server lost its
        script cache (NOSCRIPT), the script is sent again with EVAL on the same connection and
        gets ``timeout`` again. The connection goes back to the pool after a complete reply
        (an error reply included); one whose reply may still be on its way (timeout,
        cancellation, a broken connection) is closed.
        """
        conn = pending.conn
        try:
            while pending.before:  # the replies of earlier calls on this connection
                with contextlib.suppress(ResponseError):
                    await self._read(conn, pending.sent_at, timeout)
                pending.before -= 1
            if pending.evaled:
                self._root.loaded.update(script.sha for script in pending.evaled)
            try:
                reply = await self._read(conn, pending.sent_at, timeout)
                pending.answered = True
                self._root.loaded.add(pending.script.sha)
            except NoScriptError:
                pending.answered = True
                self._root.loaded.discard(pending.script.sha)
                await self._owed(pending, timeout)
                if pending.owed:  # sent behind: resending it now would reverse the order
                    raise
                script, keys, args = pending.script, pending.keys, pending.args
                try:
                    await AsyncConnections.send(
                        conn, "EVAL", script.source, len(keys), *keys, *args
                    )
                except self._foreign as exc:
                    raise translate(exc) from exc
                reply = await self._read(conn, time.monotonic(), timeout)
            await self._owed(pending, timeout)
        except ResponseError as exc:
            await self._owed(pending, timeout)
            if _READ_ONLY in str(exc):  # a replica: the master moved; the next call reconnects
                await self.keeper.discard(conn)
            else:  # a complete error reply: the connection is in sync
                await self.keeper.checkin(conn, self.closed)
            raise
        except BaseException:
            await self.keeper.discard(conn)
            raise
        await self.keeper.checkin(conn, self.closed)
        return reply

    async def _owed(self, pending: Pending, timeout: float | None) -> None:
        """Read and drop the replies of the scripts sent behind ``pending``."""
        while pending.owed:
            with contextlib.suppress(ResponseError):  # a complete reply all the same
                await self._read(pending.conn, time.monotonic(), timeout)
            pending.owed -= 1

    async def _read(self, conn: Any, since: float, timeout: float | None) -> Any:
        # At least a millisecond, so that a reply already in the buffer is still read.
        left = None if timeout is None else max(since + timeout - time.monotonic(), 0.001)
        try:
            reply = await AsyncConnections.read(conn, left)
        except self._foreign as exc:
            raise self._failed(translate(exc)) from exc
        except (ConnectionError, TimeoutError) as exc:
            self._failed(exc)
            raise
        except (OSError, ValueError) as exc:  # the socket closed under the read by close()
            if self.closed:
                raise ConnectionError("closed by redlease.close() before the reply") from exc
            raise
        if self._health.down:
            self._health.recovered()
        return reply

    async def _checkout(self) -> Any:
        """A connection for one call: a kept one (the hot path: no I/O, no context manager),
        else a new one from the pool, its errors translated (:meth:`_translated`)."""
        self._refuse_if_closed()
        return await self.keeper.checkout(self._translated)

    def idle(self) -> bool:
        """Whether a connection is open here for the next call (one kept, or a late call's
        to send behind)."""
        return self.keeper.idle()

    def hung(self) -> bool:
        """Whether the server did not answer when last asked, and has not answered in time
        since: it failed at the connection level (a connection refused or broken, a handshake
        timed out), or its last fan-out reply was late."""
        return self._health.hung() or self._root.closed

    def cold(self) -> bool:
        """Whether a call here would open a connection first, on a server not known to be
        down: then :meth:`warm` opens it outside the call's deadline."""
        return not self.keeper.idle() and self._root.graced()

    def graced(self) -> bool:
        """Whether a new connection here gets the connect timeout for its handshake and is
        kept out of a fan-out's deadline: not when the server is known down or slow."""
        return self.connect_grace and not self.hung()

    def probe(self) -> bool:
        """Whether a sync fan-out should probe this :meth:`hung` server, with no connection
        open, that a round did without (back-off: :class:`~redlease._core.health.Health`), so
        that a server that recovered is not left out of every round, its queues and locks
        going stale. The probe opens a connection off the round's path. (A late server with
        a connection open is asked in turn anyway: a loaded machine is late.)"""
        return self._health.probe(time.monotonic())

    def timely(self, answered: bool) -> None:
        """A fan-out's word on this server's reply: in time, or late (then new connections
        get no grace until a reply comes in time again, and a sync fan-out probes it if its
        connection is given up on: see :meth:`probe`)."""
        if answered:
            self._health.on_time()
        else:
            self._health.late(time.monotonic())

    async def warm(self) -> None:
        """Open a connection and keep it for the next call, within the connect timeout
        (handshake included), so that a caller that bounds its call by a deadline starts the
        clock after connecting. Raises as :meth:`send` would."""
        conn = await self._checkout()
        await self.keeper.checkin(conn, self.closed)

    def parked_calls(self) -> list[Any]:
        """The calls a fan-out left unread here (:attr:`AsyncKeeper.parked`)."""
        return self.keeper.parked_calls()

    async def abandon(self, pending: Pending) -> None:
        """Close the connection of a script whose reply will not be read."""
        await self.keeper.discard(pending.conn)

    # -- one connection, used directly (the Cluster adapter's per-node commands) ------------
    async def checkout(self) -> Any:
        """A connection for a command of the caller's (its errors translated): give it back
        with :meth:`checkin` or :meth:`release`, or :meth:`discard` it if a reply may still be
        on its way."""
        return await self._checkout()

    async def read(self, conn: Any, since: float, timeout: float | None) -> Any:
        """The next reply on ``conn``, within ``timeout`` seconds of ``since``."""
        return await self._read(conn, since, timeout)

    async def checkin(self, conn: Any) -> None:
        """Keep a connection whose replies were all read, for the next call."""
        await self.keeper.checkin(conn, self.closed)

    async def release(self, conn: Any) -> None:
        """Give back to the pool a connection whose replies were all read."""
        await self.keeper.pool.release(conn)

    async def discard(self, conn: Any) -> None:
        """Close a connection that may be out of sync, and give it back to the pool."""
        await self.keeper.discard(conn)

    def translated(self) -> AbstractContextManager[None]:
        """Within the block: the client library's errors as redis-py's, outages logged."""
        return self._translated()

    @property
    def foreign_errors(self) -> tuple[type[BaseException], ...]:
        """The client library's own exception classes (``()`` for redis-py)."""
        return self._foreign

    def library_pubsub(self) -> Any:
        """The client library's PubSub on a private connection (its errors not translated)."""
        self._refuse_if_closed()
        return self._flavor.client_class(connection_pool=self._private_pool(None)).pubsub()

    def renewal(self) -> AsyncServerRenewal:
        """How the watchdog renews holdings on this server."""
        return AsyncServerRenewal(self)

    # -- pub/sub and identity ---------------------------------------------------------------
    def pubsub(self) -> Any:
        """A new pub/sub object on a private connection (never retried by the client)."""
        return AsyncSubscription(self.library_pubsub(), self._translated)

    async def identify(self) -> tuple[str, int]:
        """``(run_id, db)``: which server this is, as the server says, and the database.

        Asked once per client (and scope); a server that restarts gets a new run_id, but stays
        the same server for this purpose, so the first answer is kept.
        """
        if self._root.identity is not None:
            return self._root.identity
        said = await run_id(self, self._timeout)
        db = int(self.client.connection_pool.connection_kwargs.get("db", 0) or 0)
        self._root.identity = (said, db)
        return self._root.identity

    async def aclose(self) -> None:
        """Refuse new calls and close the private connections (the user's client is left
        alone); connections in use are closed too, cutting short what they were waiting for."""
        self.closed = True
        for backend in (self, *self._deadlines.values()):
            await backend.keeper.aclose()

    def _refuse_if_closed(self) -> None:
        if self._root.closed:
            raise ConnectionError("redlease was closed for this client (redlease.close())")

    def _failed(self, exc: BaseException) -> BaseException:
        """Log, once until it answers again, that the server stopped answering; ``exc``."""
        if isinstance(exc, (ConnectionError, TimeoutError)) and not self._root.closed:
            self._health.outage(exc)
        return exc

    @contextmanager
    def _translated(self) -> Iterator[None]:
        """Raise redis-py's exception classes for the client library's own ones, and log
        when the server stops answering (once, until it answers again)."""
        try:
            yield
        except self._foreign as exc:  # () for redis-py: nothing to translate
            raise self._failed(translate(exc)) from exc
        except (ConnectionError, TimeoutError) as exc:
            self._failed(exc)
            raise

    @property
    def address(self) -> str:
        """Where the server is, for logs: ``host:port`` (or the socket path) and the database."""
        return address_of(self.client)
