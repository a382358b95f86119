"""The demos' worker processes: started, watched and stopped in one place (:class:`Crew`).

Also :func:`now_ns`, the clock the workers and the parent share to time what happens between
processes.
"""

from __future__ import annotations

import multiprocessing
import queue
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

from .._common import CliError
from .report import Progress

__all__ = ["STALL", "Crew", "now_ns"]


def now_ns() -> int:
    """Nanoseconds on a clock that all processes of this machine share.

    CLOCK_MONOTONIC is system-wide on Linux (and cannot jump); elsewhere ``time.monotonic``
    has no guaranteed common origin between processes, so the wall clock is used.
    """
    if sys.platform.startswith("linux"):
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    return time.time_ns()


STALL = 30.0
"""Seconds without any progress from the worker processes before a demo gives up."""


class Crew:
    """A demo's worker processes (spawned), the events that start each phase, their messages.

    Each demo subclasses it with its own ``_handle`` (what a message means), and its own
    ``finished`` and ``bar``; starting, watching and stopping the processes is written here.
    """

    def __init__(
        self,
        target: Callable[..., None],
        jobs: Sequence[Any],
        *,
        phases: int,
        slots: int,
        progress: Progress,
        name: str,
        noun: str,
    ) -> None:
        ctx = multiprocessing.get_context("spawn")  # the same on every OS; no forked state
        self.go = [ctx.Event() for _ in range(phases)]
        self.progress: Any = ctx.Array("q", slots, lock=False)
        self.messages: Any = ctx.Queue()
        self.out = progress
        self.noun = noun
        self.ready: set[int] = set()
        self.procs = [
            ctx.Process(
                target=target,
                args=(job, self.go, self.progress, self.messages),
                name=f"{name}-{job.index}",
                daemon=True,
            )
            for job in jobs
        ]

    def start(self) -> None:
        """Spawn the processes (they connect, report ready and wait for go)."""
        for proc in self.procs:
            proc.start()

    def wait_until(self, finished: Callable[[], bool], show: Callable[[], str] | None) -> None:
        """Handle messages until ``finished()``; CliError if a process fails or all stall."""
        last, last_change = -1, time.monotonic()
        while not finished():
            try:
                self._handle(self.messages.get(timeout=0.05))
                continue
            except queue.Empty:
                pass
            for proc in self.procs:
                if proc.exitcode is not None and proc.exitcode != 0:
                    raise CliError(
                        f"{self.noun} process {proc.name} exited with code {proc.exitcode}", 1
                    )
            total = sum(self.progress) + len(self.ready)
            if total != last:
                last, last_change = total, time.monotonic()
            elif time.monotonic() - last_change > STALL:
                raise CliError(f"the {self.noun} processes made no progress for {STALL:g} s", 1)
            if show is not None:
                self.out.update(show())

    def _handle(self, message: tuple[Any, ...]) -> None:
        """Apply one message from a process (``ready``, ``done``, ``error``, ...)."""
        raise NotImplementedError

    def stop(self) -> None:
        """Let finished processes exit; terminate the others (after a failure or Ctrl-C)."""
        for proc in self.procs:
            if proc.is_alive():
                proc.join(0.5 if proc.exitcode is None else 0)
            if proc.is_alive():
                proc.terminate()
                proc.join(2)
        self.messages.close()
