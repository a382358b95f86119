"""The command ``redlease run`` starts: signals forwarded to it, terminated when the lease
is lost, its exit code reported shell-style (128+S for a signal S, 126/127 if it cannot start)."""

from __future__ import annotations

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

from ._common import PROG

__all__ = [
    "EX_NOEXEC",
    "EX_NOTFOUND",
    "GRACE",
    "Child",
    "Interrupted",
    "run_command",
    "signals_to",
    "warn",
]

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


class Interrupted(BaseException):
    """A signal arrived while waiting for the lock: give up waiting (like Ctrl-C)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class Child:
    """COMMAND's process: signals are forwarded to it; it is terminated if the lock is lost.

    Phases: waiting for the lock (a signal interrupts the wait), deferring (the lock is ours and
    the child is being started: signals are kept for it), running (signals are forwarded),
    finished (signals are ignored: only the release is left to do).
    """

    def __init__(self, name: str, what: str = "lock") -> None:
        self.name = name
        self.what = what  # how warnings call what is held: "lock", "the run of"
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
            raise Interrupted(signum)

    # -- called by the lock's watchdog thread ---------------------------------------------
    def on_lost(self) -> None:
        """The lock was lost: warn and terminate the command (at once, or once it started)."""
        with self._guard:
            if self.lost or self.finished:
                return
            self.lost = True
        warn(
            f"{self.what} {self.name!r} was lost while the command ran (its lease could not be "
            "renewed in time, or it was taken or force-released): terminating the command"
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
        warn(f"the command did not exit within {GRACE:g} s of SIGTERM: killing it")
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
def signals_to(handler: Callable[[int, FrameType | None], None]) -> Iterator[None]:
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


def warn(message: str) -> None:
    """Print ``redlease: warning: MESSAGE`` on stderr."""
    print(f"{PROG}: warning: {message}", file=sys.stderr, flush=True)


def run_command(child: Child, command: list[str], env: dict[str, str]) -> int:
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
