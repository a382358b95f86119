"""Run one script on N servers at once, each reply bounded by one shared deadline.

The sync and asyncio forms are different algorithms, so both are written by hand and both are
imported from here (``AsyncFanOut`` is what ``_async/`` uses; unasync renames it to ``FanOut``
for ``_sync/``):

* asyncio: one task per server sends the command and reads its reply;
* sync: no threads. The command is written to every server first (``backend.send``), then the
  replies are read as they arrive (``poll`` over the sockets), all within ``timeout`` of
  sending. One round trip, like the asyncio form; a hung server costs the deadline once.

The command is packed once for all servers that get the same script, keys and args.

Opening a connection is not billed to the deadline: it has its own timeout (the backend's
connect timeout, handshake included), and a call's clock starts once it is sent (sync:
servers with a connection open are sent to first; asyncio: a stall of the process before
its tasks sent counts against nobody), unless the server is known to be down or its last
reply was late (then the hung servers cost a round its deadline once, however many hang,
not a connect timeout each), so a fresh Redlock's first round does not spend its deadline
connecting.

A process that was itself paused past the deadline (asyncio: its timer fired more than half
a deadline late) does not blame the servers for it: their replies get one more deadline, once
per round (sync: ``poll`` looks at the sockets once more when it wakes up, so what arrived
during the pause is read anyway).

A caller may stop early: ``enough(results)`` is asked after each reply (e.g. "a majority
granted", or "a majority can no longer grant"). The replies not read by then, or not by the
deadline, come back as :class:`Late` (a ``TimeoutError``: a vote not cast). Their connections
stay open: the reply is collected later, off the caller's path (asyncio: by its task, which
keeps reading; sync: by the next fan-out on that server, which first collects whatever has
arrived, or by :meth:`FanOut.arrived`), for at most :data:`LATE` seconds after sending
(asyncio: the connection's read timeout, which ``with_deadline`` sets that much past the
round's deadline), and a script can still be sent behind it with
:meth:`AsyncFanOut.follow`: the server runs it right after the late one, however late that
is (how a late grant is undone: it can never be left held).

Both talk to Redis only through the backends (see ``_async/one_server.py``). A server that fails
yields its exception in place of its reply; nothing is raised for it.

By what they hold: :mod:`.tasks` (the asyncio form), :mod:`.blocking` (the sync form),
:mod:`.results` (a round's calls and results: ``Late``, ``Unsent``), :mod:`.servers` (a
server's health as the rounds use it, and the late calls parked on it), :mod:`.poll` (sync
socket readiness).
"""

from __future__ import annotations

from .blocking import FanOut
from .results import LATE, NOT_YET, Call, Late, Unsent
from .servers import hung
from .tasks import AsyncFanOut

__all__ = ["LATE", "NOT_YET", "AsyncFanOut", "Call", "FanOut", "Late", "Unsent", "hung"]
