"""``redlease run NAME -- COMMAND...``: hold a lock while a command runs, like flock(1)."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import redlease

from ._common import (
    DEFAULT_URL,
    EX_LOST,
    EX_TEMPFAIL,
    EX_USAGE,
    PROG,
    CliError,
    check_connection,
    global_options,
    handler_defaults,
    lease_seconds,
    lock_name,
    unavailable,
    wait_seconds,
)

__all__ = ["GRACE", "add_parser", "command"]

GRACE = 10.0
"""Seconds a command terminated because the lock was lost has before it gets SIGKILL."""

EX_NOEXEC, EX_NOTFOUND = 126, 127  # what a shell returns for these

_FORWARDED = tuple(
    sig
    for sig in (
        signal.SIGINT,
        signal.SIGTERM,
        getattr(signal, "SIGHUP", None),
        getattr(signal, "SIGQUIT", None),
        getattr(signal, "SIGUSR1", None),
        getattr(signal, "SIGUSR2", None),
    )
    if sig is not None
)
# Signals a terminal sends to its whole foreground process group (so the command got it too).
_KEYBOARD = frozenset(s for s in (signal.SIGINT, getattr(signal, "SIGQUIT", None)) if s)

_DESCRIPTION = """\
Hold lock NAME while COMMAND runs, like flock(1) but across hosts: e.g. a cron job installed
on several machines that must never run twice at the same time.

The lock is a lease of --ttl seconds, renewed every ttl/3 while COMMAND runs. If redlease
itself dies (crash, kill -9, host down) the lock frees itself within ttl; note that a
COMMAND whose redlease was killed with SIGKILL keeps running, without the lock.

Waiting: by default run waits for the lock as long as it takes, like flock. For cron, use
--timeout 0 (or -n): when another host holds the lock this run is skipped (exit 75);
otherwise runs that overlap queue up and then run one after the other.

COMMAND's environment gets REDLEASE_LOCK=NAME and REDLEASE_FENCE=<fencing token>: a number
that grows with every acquisition of NAME; writes tagged with it let your storage reject an
older holder that did not notice it lost the lock.

Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 are forwarded to COMMAND
(a Ctrl-C typed in the terminal reaches COMMAND directly and is not sent twice). The lock
is released when COMMAND ends, however it ends.

If the lock is lost while COMMAND runs (its lease could not be renewed: Redis unreachable
for longer than ttl, or the key was deleted or taken), redlease prints a warning, sends
COMMAND SIGTERM (SIGKILL 10 s later if it still runs) and exits 70: by then another
holder may have the lock.
"""

_EPILOG = """\
exit codes:
  N        COMMAND's exit code (128+S if a signal S killed it)
  2        bad arguments
  69       Redis unreachable or failing: COMMAND was not run
  70       the lock was lost before COMMAND ended; COMMAND was terminated if still running
  75       the lock stayed held by another for the whole --timeout: COMMAND was not run
  126/127  COMMAND is not executable / not found (the lock is released)
  128+S    a signal S interrupted the wait for the lock (130: Ctrl-C, 143: SIGTERM)

examples:
  redlease run nightly-report -n -- /usr/local/bin/report --daily
  redlease --url rediss://:secret@redis.internal:6380 run migrate --timeout 600 -- ./migrate
  redlease run orders -- sh -c 'echo "holding fence $REDLEASE_FENCE"; ./sync-orders'
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``run`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        parents=[global_options(url_default=DEFAULT_URL)],
        help="hold a lock while a command runs (flock(1) across hosts)",
        description=_DESCRIPTION,
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="%(prog)s [options] NAME -- COMMAND [ARG...]",
    )
    parser.add_argument("name", type=lock_name, metavar="NAME", help="the lock's name")
    parser.add_argument(
        "command",
        nargs="*",
        metavar="COMMAND",
        help="the command and its arguments (put -- before it)",
    )
    parser.add_argument(
        "--ttl",
        type=lease_seconds,
        default=10.0,
        metavar="S",
        help="lease in seconds, renewed every ttl/3 while COMMAND runs; how long the lock "
        "outlives a crashed redlease (default: 10)",
    )
    wait = parser.add_mutually_exclusive_group()
    wait.add_argument(
        "--timeout",
        type=wait_seconds,
        default=None,
        metavar="S",
        help="give up (exit 75, COMMAND not run) if the lock is not ours within S seconds; "
        "0: one try; -1 or inf: as long as it takes, the default (as Lock.acquire)",
    )
    wait.add_argument(
        "-n",
        "--nonblock",
        dest="timeout",
        action="store_const",
        const=0.0,
        help="same as --timeout 0 (like flock -n): the choice for cron jobs",
    )
    handler_defaults(parser, command)


class _Interrupted(BaseException):
    """A signal arrived while waiting for the lock: give up waiting (like Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _Child:
    """COMMAND's process: signals are forwarded to it; it is terminated if the lock is lost.

    Phases: waiting for the lock (a signal interrupts the wait), deferring (the lock is ours and
    the child is being started: signals are kept for it), running (signals are forwarded),
    finished (signals are ignored: only the release is left to do).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.proc: subprocess.Popen[bytes] | None = None
        self.deferring = False
        self.finished = False
        self.lost = False
        self._pending: list[int] = []
        self._guard = threading.Lock()  # never taken in a signal handler
        self._killer: threading.Timer | None = None

    # -- called in the main thread, as a signal handler -----------------------------------
    def on_signal(self, signum: int, frame: FrameType | None) -> None:
        """Interrupt the wait, keep the signal for the child, or forward it."""
        if self.finished:
            return
        proc = self.proc
        if proc is not None:
            _forward(proc, signum)
        elif self.deferring:
            self._pending.append(signum)
        else:
            raise _Interrupted(signum)

    # -- called by the lock's watchdog thread ---------------------------------------------
    def on_lost(self) -> None:
        """The lock was lost: warn and terminate the command (at once, or once it started)."""
        with self._guard:
            if self.lost or self.finished:
                return
            self.lost = True
        _warn(
            f"lock {self.name!r} was lost while the command ran (its lease could not be "
            "renewed in time, or it was taken): terminating the command"
        )
        proc = self.proc
        if proc is not None:
            self._terminate(proc)

    # -- main thread ------------------------------------------------------------------------
    def start(self, command: list[str], env: dict[str, str]) -> None:
        """Start the command; signals that arrived since the lock was taken are sent to it."""
        self.proc = proc = subprocess.Popen(command, env=env)
        for signum in self._pending:
            _forward(proc, signum)
        self._pending.clear()
        if self.lost:  # lost before the child existed
            self._terminate(proc)

    def wait(self) -> int:
        """Wait for the command; its exit code, shell style (128+S when killed by signal S)."""
        assert self.proc is not None
        returncode = self.proc.wait()
        self.finish()
        return returncode if returncode >= 0 else 128 - returncode

    def finish(self) -> None:
        """The command ended (or never started): ignore signals, stop any pending SIGKILL."""
        with self._guard:
            self.finished = True
            killer, self._killer = self._killer, None
        if killer is not None:
            killer.cancel()

    def _terminate(self, proc: subprocess.Popen[bytes]) -> None:
        with self._guard:
            if self._killer is not None or self.finished:
                return
            self._killer = threading.Timer(GRACE, _kill, (proc,))
            self._killer.daemon = True
            self._killer.start()
        _send(proc, signal.SIGTERM)


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        _warn(f"the command did not exit within {GRACE:g} s of SIGTERM: killing it")
        _send(proc, signal.SIGKILL)


def _send(proc: subprocess.Popen[bytes], signum: int) -> None:
    with contextlib.suppress(OSError):  # already gone
        proc.send_signal(signum)


def _forward(proc: subprocess.Popen[bytes], signum: int) -> None:
    if signum in _KEYBOARD and _terminal_sent_it_too(proc.pid):
        return
    _send(proc, signum)


def _terminal_sent_it_too(pid: int) -> bool:
    """Whether a keyboard signal we got was also sent to ``pid`` by the terminal.

    True when ``pid`` is in our process group and that group is in the foreground of our
    terminal (Ctrl-C, Ctrl-\\ go to the whole group): forwarding would deliver it twice.
    """
    try:
        group = os.getpgrp()
        if os.getpgid(pid) != group:
            return False
        for fd in (0, 1, 2):
            if os.isatty(fd):
                return os.tcgetpgrp(fd) == group
    except (OSError, AttributeError):  # no such process; or not POSIX
        return False
    return False


@contextmanager
def _signals_to(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
    """Route the forwarded signals to ``handler`` (main thread only); restore them after.

    A signal that is ignored stays ignored, for us and for the command (as under nohup).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}
    try:
        for sig in _FORWARDED:
            previous = signal.getsignal(sig)
            if previous is signal.SIG_IGN:
                continue
            saved[sig] = signal.SIG_DFL if previous is None else previous
            signal.signal(sig, handler)
        yield
    finally:
        for sig, previous in saved.items():
            signal.signal(sig, previous)


def _warn(message: str) -> None:
    print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)


def command(args: argparse.Namespace) -> int:
    """Run ``redlease run``: see the module and ``--help`` for the behaviour and exit codes."""
    name: str = args.name
    client, url = args.client, args.url
    check_connection(client, url)
    child = _Child(name)
    try:
        lock = redlease.Lock(client, name, ttl=args.ttl, prefix=args.prefix, on_lost=child.on_lost)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc), EX_USAGE) from exc
    with _signals_to(child.on_signal):
        try:
            acquired = lock.acquire(timeout=args.timeout)
            child.deferring = True  # from here on a signal is kept for the child
        except _Interrupted as exc:
            child.finish()
            if lock.fence is not None:  # the signal came just after the lock was taken
                _release(lock, child, url)
            return 128 + exc.signum
        except redlease.LockUnavailable as exc:
            raise unavailable(url, exc) from exc
        if not acquired:
            child.finish()
            waited = "" if not args.timeout else f" for {args.timeout:g} s"
            print(
                f"{PROG}: lock {name!r} is held by another{waited}: command not run",
                file=sys.stderr,
            )
            return EX_TEMPFAIL
        env = {**os.environ, "REDLEASE_LOCK": name, "REDLEASE_FENCE": str(lock.fence)}
        try:
            code = _run(child, args.command, env)
        finally:
            child.finish()
            lost_at_release = _release(lock, child, url)
    return EX_LOST if child.lost or lost_at_release else code


def _run(child: _Child, command: list[str], env: dict[str, str]) -> int:
    """Start the command and wait for it; 126/127 (with a message) if it cannot be started."""
    try:
        child.start(command, env)
    except FileNotFoundError:
        print(f"{PROG}: error: command not found: {command[0]}", file=sys.stderr)
        return EX_NOTFOUND
    except OSError as exc:
        print(f"{PROG}: error: cannot run {command[0]}: {exc.strerror or exc}", file=sys.stderr)
        return EX_NOEXEC
    return child.wait()


def _release(lock: redlease.Lock, child: _Child, url: str) -> bool:
    """Release the lock; True if it turned out to be lost (a warning says so, once)."""
    try:
        lock.release()
    except redlease.LockLost:
        if not child.lost:
            _warn(
                f"lock {lock.name!r} was lost before the command ended (its lease ran out or "
                "it was taken): another holder may have overlapped with it"
            )
        return True
    except redlease.LockUnavailable as exc:
        _warn(
            f"could not release the lock ({unavailable(url, exc)}); it frees itself "
            f"within its ttl ({lock.ttl:g} s)"
        )
    return False
