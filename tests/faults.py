"""Network fault helpers for tests, loopback (127.0.0.1) only.

* :class:`HangingServer` accepts TCP connections and never answers.
* :class:`TcpProxy` forwards to a real server and can be told to ``hang()``.

Each runs one daemon thread that waits in ``select()`` with a short timeout (no busy
loop) and closes every socket it opened when stopped.
"""

from __future__ import annotations

import select
import socket
import threading
from types import TracebackType

from redlease.server import HOST
from tests.topology import RedisServer

_TICK = 0.05  # seconds a worker thread waits before re-checking its flags


def _listener() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(64)
    return sock


class _Worker:
    """A listener on a free 127.0.0.1 port served by one daemon thread."""

    def __init__(self) -> None:
        self._listen = _listener()
        self.port: int = self._listen.getsockname()[1]
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name=type(self).__name__, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        """``redis://127.0.0.1:PORT`` of the listener."""
        return f"redis://{HOST}:{self.port}"

    def close(self) -> None:
        """Stop the thread and close all sockets."""
        self._stopping.set()
        self._thread.join(timeout=5)
        self._listen.close()

    def __enter__(self) -> _Worker:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def _run(self) -> None:
        raise NotImplementedError


class HangingServer(_Worker):
    """Accepts connections, reads and discards everything, never answers."""

    def __enter__(self) -> HangingServer:
        return self

    def stop(self) -> None:
        """Same as close()."""
        self.close()

    def _run(self) -> None:
        conns: list[socket.socket] = []
        try:
            while not self._stopping.is_set():
                readable, _, _ = select.select([self._listen, *conns], [], [], _TICK)
                for sock in readable:
                    if sock is self._listen:
                        conns.append(self._listen.accept()[0])
                    elif not _recv(sock):
                        conns.remove(sock)
                        sock.close()
        finally:
            for sock in conns:
                sock.close()


class TcpProxy(_Worker):
    """Forwards 127.0.0.1:``port`` to a target server; ``hang()`` stalls all traffic."""

    def __init__(self, target: RedisServer | int) -> None:
        self.target_port = target if isinstance(target, int) else target.port
        self._hung = threading.Event()
        super().__init__()

    def __enter__(self) -> TcpProxy:
        return self

    def hang(self) -> None:
        """Stop forwarding: connections stay open (and new ones are accepted) but no byte
        moves in either direction, so answers never arrive."""
        self._hung.set()

    def resume(self) -> None:
        """Forward again (bytes queued meanwhile are delivered)."""
        self._hung.clear()

    def _run(self) -> None:
        peers: dict[socket.socket, socket.socket] = {}  # each side maps to the other
        try:
            while not self._stopping.is_set():
                watched = [self._listen] if self._hung.is_set() else [self._listen, *peers]
                readable, _, _ = select.select(watched, [], [], _TICK)
                for sock in readable:
                    if sock is self._listen:
                        self._accept(peers)
                    elif sock in peers:  # may have been closed as the other side of a pair
                        data = _recv(sock)
                        try:
                            if data:
                                peers[sock].sendall(data)
                                continue
                        except OSError:
                            pass
                        other = peers.pop(sock)
                        peers.pop(other, None)
                        sock.close()
                        other.close()
        finally:
            for sock in peers:
                sock.close()

    def _accept(self, peers: dict[socket.socket, socket.socket]) -> None:
        client = self._listen.accept()[0]
        try:
            upstream = socket.create_connection((HOST, self.target_port), timeout=2)
        except OSError:
            client.close()  # target down: the client sees a closed connection
            return
        for sock in (client, upstream):
            sock.settimeout(2)  # bounds sendall() to a peer that stopped reading
        peers[client], peers[upstream] = upstream, client


def _recv(sock: socket.socket) -> bytes:
    """Read what is available; b"" means the peer closed or the socket failed."""
    try:
        return sock.recv(65536)
    except OSError:
        return b""
