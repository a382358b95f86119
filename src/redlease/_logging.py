"""redlease's logger, ``logging.getLogger("redlease")``, and the events it records.

Silent unless the application configures logging: the logger has a ``NullHandler`` (so
Python's last-resort handler never prints its warnings to stderr) and redlease never calls
``basicConfig``. Every record says what happened in its message and carries structured fields
for log pipelines (``extra=``, every key prefixed ``redlease_``): ``redlease_event`` always,
and, as they apply, ``redlease_primitive``, ``redlease_name``, ``redlease_fence``,
``redlease_server``, ``redlease_error``.

The events, their levels and fields are listed in ``docs/reference/operating.rst``; every
record is made by :func:`record`, most through :mod:`redlease._observe`.
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
