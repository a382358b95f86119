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
import traceback
from typing import Any

from ._core.kept import kept

__all__ = ["log", "record"]

log = logging.getLogger("redlease")
log.addHandler(logging.NullHandler())


def record(level: int, event: str, message: str, *args: Any, **fields: Any) -> None:
    """Log ``message % args`` at ``level`` with ``redlease_event=event`` and ``fields``, each
    key prefixed ``redlease_``; ``exc_info``, an exception, is logged with its traceback as
    text (``exc_text``) and a copy of it that holds no frames."""
    if not log.isEnabledFor(level):
        return
    exc_info = fields.pop("exc_info", None)
    extra = {"redlease_event": event}
    extra.update({f"redlease_{key}": value for key, value in fields.items()})
    if not isinstance(exc_info, BaseException):
        log.log(level, message, *args, extra=extra, exc_info=exc_info)
        return
    # A handler may keep the record (a buffer, a test's capture): it gets the traceback as
    # text and a copy of the error without frames, whose locals (a lock handle, held by a
    # callback or a caller's frame) would otherwise live as long as the record.
    fn, lno, func, _ = log.findCaller()
    item = log.makeRecord(
        log.name,
        level,
        fn,
        lno,
        message,
        args,
        (type(exc_info), kept(exc_info), None),
        func,
        extra,
    )
    item.exc_text = "".join(traceback.format_exception(exc_info)).rstrip("\n")
    log.handle(item)
