"""sync: which of a round's connections have a reply to read (``poll`` over their sockets)."""

from __future__ import annotations

import select
from typing import Any

from .._redispy_versions import socket_of

__all__ = ["Poller", "fileno", "ready"]


def fileno(pending: Any) -> int:
    """The socket of a sent call's connection (negative: closed, so its read fails at once)."""
    sock = socket_of(pending.conn)
    if sock is None:  # pragma: no cover - just sent on it
        return -id(pending)
    return int(sock.fileno())


def ready(fds: list[int], timeout: float) -> list[int]:
    """The sockets among ``fds`` with something to read within ``timeout`` seconds (a
    negative fd, a closed connection, is ready: its read fails at once)."""
    closed = [fd for fd in fds if fd < 0]
    if closed:
        return closed
    if hasattr(select, "poll"):
        poller = select.poll()
        for fd in fds:
            poller.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)
        return [fd for fd, _ in poller.poll(timeout * 1000)]
    readable, _, _ = select.select(fds, [], [], timeout)  # pragma: no cover - no poll
    return list(readable)


class Poller:
    """The sockets of one round's calls, polled until each is read (one ``poll`` object for
    the round, not one per look)."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds
        self._poll: Any = None
        if hasattr(select, "poll") and all(fd >= 0 for fd in fds):
            self._poll = select.poll()
            for fd in fds:
                self._poll.register(fd, select.POLLIN | select.POLLERR | select.POLLHUP)

    def ready(self, timeout: float) -> list[int]:
        """The sockets with something to read within ``timeout`` seconds."""
        if self._poll is None:
            return ready(self._fds, timeout)
        return [fd for fd, _ in self._poll.poll(timeout * 1000)]

    def done(self, fd: int) -> None:
        """``fd`` was read: not polled again."""
        if self._poll is None:
            self._fds.remove(fd)
        else:
            self._poll.unregister(fd)
