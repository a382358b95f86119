"""redlease's logger, ``logging.getLogger("redlease")``, and the events it records.

Silent unless the application configures logging: the logger has a ``NullHandler`` (so
Python's last-resort handler never prints its warnings to stderr) and redlease never calls
``basicConfig``. Every record says what happened in its message and carries structured fields
for log pipelines (``extra=``, every key prefixed ``redlease_``): ``redlease_event`` always,
and, as they apply, ``redlease_primitive``, ``redlease_name``, ``redlease_fence``,
``redlease_server``, ``redlease_error``.

===========================  =======  =======================================================
``redlease_event``           level    when
===========================  =======  =======================================================
``lease_lost``               WARNING  the watchdog found a lease gone, or it ran out while
                                      renewals failed, or ``release()`` found it gone
``renewal_failed``           WARNING  a renewal got no answer; it is retried until the lease
                                      is surely over
``server_unavailable``       WARNING  a server stopped answering (once, until it answers)
``server_available``         INFO     ... and answers again
``handoff_skipped``          INFO     a waiter of this process tries the lock because the
                                      waiter ahead of it missed its turn (dead or too slow):
                                      the script skips it
``handoff_to_gone_waiter``   INFO     the lock was handed to a waiter this process no longer
                                      has; its turn lapses after the hand-off window
``held_at_close``            WARNING  ``close()`` found a lease still held: it is no longer
                                      renewed and runs out within its ttl
``on_lost_failed``           ERROR    an ``on_lost`` callback raised
===========================  =======  =======================================================
"""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["log", "record"]

log = logging.getLogger("redlease")
log.addHandler(logging.NullHandler())


def record(level: int, event: str, message: str, *args: Any, **fields: Any) -> None:
    """Log ``message % args`` at ``level`` with ``redlease_event=event`` and ``fields``, each
    key prefixed ``redlease_``; ``exc_info`` is passed on as is."""
    if not log.isEnabledFor(level):
        return
    exc_info = fields.pop("exc_info", None)
    extra = {"redlease_event": event}
    extra.update({f"redlease_{key}": value for key, value in fields.items()})
    log.log(level, message, *args, extra=extra, exc_info=exc_info)
