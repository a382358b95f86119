"""An asyncio TCP proxy in front of a server, for network faults (127.0.0.1 only).

:class:`ChaosProxy` forwards ``127.0.0.1:port`` to a target port. It runs its own event loop
in one daemon thread; the fault methods are called from any thread:

* ``latency(seconds)``: every chunk waits that long before it is forwarded (0 to stop);
* ``stall()`` / ``resume()``: no byte moves in either direction (connections stay open, new
  ones are accepted and wait); what was sent meanwhile is delivered on ``resume()``;
* ``drop()``: close every open connection at once (new ones are accepted).

``close()`` closes the listener and every connection and joins the thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from types import TracebackType

HOST = "127.0.0.1"
_CHUNK = 65536


class ChaosProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port`` with injectable faults."""

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._port = 0
        self._latency = 0.0
        self._flowing: asyncio.Event | None = None
        self._conns: set[asyncio.StreamWriter] = set()
        self._pumps: set[asyncio.Future[None]] = set()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self._main, name="ChaosProxy", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("proxy did not start")

    @property
    def port(self) -> int:
        """The port clients connect to."""
        return self._port

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT`` of the proxy."""
        return f"redis://{HOST}:{self._port}"

    # -- faults (any thread) -------------------------------------------------------------------
    def latency(self, seconds: float) -> None:
        """Delay every forwarded chunk by ``seconds`` (0: no delay)."""
        self._latency = max(0.0, float(seconds))

    def stall(self) -> None:
        """Stop moving bytes in both directions until :meth:`resume`."""
        self._call(lambda: self._flowing.clear() if self._flowing else None)

    def resume(self) -> None:
        """Move bytes again; end any latency too."""
        self._latency = 0.0
        self._call(lambda: self._flowing.set() if self._flowing else None)

    def drop(self) -> None:
        """Close every open connection now (clients see a reset or EOF)."""
        self._call(self._drop_all)

    def close(self) -> None:
        """Stop listening, close every connection, stop the loop and join the thread."""
        if not self._thread.is_alive():
            return
        fut = asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop)
        with contextlib.suppress(Exception):
            fut.result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def __enter__(self) -> ChaosProxy:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- the loop thread -------------------------------------------------------------------------
    def _call(self, fn: object) -> None:
        done = threading.Event()

        def run() -> None:
            try:
                fn()  # type: ignore[operator]
            finally:
                done.set()

        self._loop.call_soon_threadsafe(run)
        done.wait(5)

    def _main(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._start())
        self._ready.set()
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    async def _start(self) -> None:
        self._flowing = asyncio.Event()
        self._flowing.set()
        self._server = await asyncio.start_server(self._serve, HOST, 0, backlog=128)
        self._port = self._server.sockets[0].getsockname()[1]

    async def _serve(self, client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            up_r, up_w = await asyncio.wait_for(
                asyncio.open_connection(HOST, self.target_port), timeout=2.0
            )
        except (OSError, asyncio.TimeoutError):
            client_w.close()  # target down: the client sees the connection closed
            return
        self._conns.update((client_w, up_w))
        pumps = [
            asyncio.ensure_future(self._pump(client_r, up_w)),
            asyncio.ensure_future(self._pump(up_r, client_w)),
        ]
        self._pumps.update(pumps)
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in pumps:
                task.cancel()
                self._pumps.discard(task)
            await asyncio.gather(*pumps, return_exceptions=True)
            for writer in (client_w, up_w):
                self._conns.discard(writer)
                writer.close()

    async def _pump(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        assert self._flowing is not None
        with contextlib.suppress(OSError, asyncio.IncompleteReadError):
            while True:
                data = await reader.read(_CHUNK)
                if not data:
                    return
                if self._latency:
                    await asyncio.sleep(self._latency)
                await self._flowing.wait()
                writer.write(data)
                await writer.drain()

    def _drop_all(self) -> None:
        for writer in list(self._conns):
            transport = writer.transport
            transport.abort()  # RST-like: no graceful close
        self._conns.clear()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        self._drop_all()
        assert self._flowing is not None
        self._flowing.set()
        for task in list(self._pumps):
            task.cancel()  # each connection's handler then closes its sockets and returns
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        await asyncio.wait(others, timeout=5) if others else None
