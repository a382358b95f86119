"""Run one script on N servers at once, each reply bounded by one shared deadline.

The sync and asyncio forms are different algorithms, so both are written here side by side
(``AsyncFanOut`` is what ``_async/`` uses; unasync renames it to ``FanOut`` for ``_sync/``):

* asyncio: one task per server, each reply bounded by ``timeout``;
* sync: no threads. The command is written to every server's connection first, then the
  replies are read in turn, each within ``timeout`` of when its command was sent. One round
  trip, like the asyncio form; a hung server costs its deadline once, and the replies of the
  others have arrived meanwhile.

A server that fails yields its exception in place of its reply; nothing is raised for it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any

from redis.exceptions import NoScriptError, ResponseError

from ._async.client import run_script
from ._core.scripts import Script

__all__ = ["AsyncFanOut", "Call", "FanOut"]

Call = tuple[Any, Script, Sequence[bytes], Sequence[Any]]
"""One server's part: (pool, script, keys, args)."""


class AsyncFanOut:
    """Scripts on N servers at once, with asyncio."""

    @staticmethod
    async def run(calls: Sequence[Call], timeout: float) -> list[Any]:
        """Each call's reply, or the exception it raised, in order; within ``timeout``."""

        async def one(call: Call) -> Any:
            try:
                return await run_script(*call, timeout=timeout)
            except Exception as exc:  # a failed server is a vote not cast, not an error
                return exc

        return list(await asyncio.gather(*(one(call) for call in calls)))


class FanOut:
    """Scripts on N servers at once, without threads: write everything, then read."""

    @staticmethod
    def run(calls: Sequence[Call], timeout: float) -> list[Any]:
        """Each call's reply, or the exception it raised, in order; each within ``timeout``."""
        results: list[Any] = [None] * len(calls)
        sent: list[tuple[int, Any, float]] = []
        try:
            for i, (pool, script, keys, args) in enumerate(calls):
                conn = None
                try:
                    conn = pool.get_connection()
                    conn.send_command("EVALSHA", script.sha, len(keys), *keys, *args)
                    sent.append((i, conn, time.monotonic() + timeout))
                except Exception as exc:
                    results[i] = exc
                    if conn is not None:
                        conn.disconnect()
                        pool.release(conn)
            for i, conn, deadline in sent:
                pool, script, keys, args = calls[i]
                try:
                    try:
                        results[i] = _read(conn, deadline)
                    except NoScriptError:  # the server lost its scripts: a new round trip
                        conn.send_command("EVAL", script.source, len(keys), *keys, *args)
                        results[i] = _read(conn, time.monotonic() + timeout)
                except ResponseError as exc:
                    results[i] = exc
                except Exception as exc:
                    conn.disconnect()
                    results[i] = exc
        except BaseException:
            for _, conn, _ in sent:
                conn.disconnect()
            raise
        finally:
            for i, conn, _ in sent:
                calls[i][0].release(conn)
        return results


def _read(conn: Any, deadline: float) -> Any:
    # A reply already received is read even when the deadline has passed.
    return conn.read_response(timeout=max(deadline - time.monotonic(), 0.001))
