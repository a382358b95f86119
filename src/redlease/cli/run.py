"""``redlease run NAME -- COMMAND...``: hold a lock while a command runs, like flock(1).

With ``--every DURATION`` the command runs at most once per period instead (a
:class:`redlease.Once`): the choice for a cron job installed on several hosts.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

import redlease

from .._core.once import every_ms
from ._child import GRACE, Child, Interrupted, run_command, signals_to, warn
from ._common import (
    DEFAULT_URL,
    EX_LOST,
    EX_TEMPFAIL,
    EX_USAGE,
    PROG,
    CliError,
    global_options,
    handler_defaults,
    lease_seconds,
    lock_name,
    wait_seconds,
)
from ._connection import check_connection, unavailable

__all__ = ["GRACE", "add_parser", "command"]

_DESCRIPTION = """\
Hold lock NAME while COMMAND runs, like flock(1) but across hosts: e.g. a cron job installed
on several machines that must never run twice at the same time.

The lock is a lease of --ttl seconds, renewed every ttl/3 while COMMAND runs. If redlease
itself dies (crash, kill -9, host down) the lock frees itself within ttl; note that a
COMMAND whose redlease was killed with SIGKILL keeps running, without the lock.

Waiting: by default run waits for the lock as long as it takes, like flock. For cron, use
--every (below), or --timeout 0 (-n): when another host holds the lock this run is skipped
(exit 75); otherwise runs that overlap queue up and then run one after the other.

COMMAND's environment gets REDLEASE_LOCK=NAME and REDLEASE_FENCE=<fencing token>: a number
that grows with every acquisition of NAME; writes tagged with it let your storage reject an
older holder that did not notice it lost the lock.

Once per period (--every DURATION, e.g. 90s, 15m, 24h, 7d, 1h30m, or seconds): COMMAND
runs only if no run of NAME is in progress and none succeeded less than DURATION ago, on
the Redis server's clock, so hosts whose cron entries fire seconds apart (clock skew, a
slow boot) run it once. Success (exit 0) keeps NAME taken until the run's start + DURATION;
a failure frees it at once, so the next host to try runs it again; a redlease killed
mid-run frees it within --ttl. A run never waits.

A skipped run (the lock held by another for --timeout, or NAME run within its period)
prints nothing unless -v, and exits 75 or the code given with -E (like flock -n -E N).

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
  75       skipped: the lock stayed held by another for the whole --timeout, or (--every)
           a run is in progress or succeeded within the period: COMMAND was not run
           (-E N: N instead)
  126/127  COMMAND is not executable / not found (the lock is released)
  128+S    a signal S interrupted the wait for the lock (130: Ctrl-C, 143: SIGTERM)

examples:
  redlease run nightly-report --every 24h -- /usr/local/bin/report --daily
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
        help="same as --timeout 0 (like flock -n)",
    )
    parser.add_argument(
        "--every",
        type=period_seconds,
        default=None,
        metavar="DURATION",
        help="run COMMAND at most once per DURATION (90s, 15m, 24h, 7d, 1h30m or seconds), "
        "across hosts: the choice for cron jobs",
    )
    parser.add_argument(
        "-E",
        "--conflict-exit-code",
        type=exit_code,
        default=EX_TEMPFAIL,
        metavar="N",
        help="exit code when COMMAND was skipped (default: 75)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="say why COMMAND was skipped (stderr)"
    )
    handler_defaults(parser, command)


def period_seconds(text: str) -> float:
    """argparse type of ``--every``: a duration (``24h``, ``90s``) or seconds, as ``Once``."""
    try:
        return every_ms(text, "--every") / 1000
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def exit_code(text: str) -> int:
    """argparse type of ``-E``: an exit code, 0 to 255."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= value <= 255:
        raise argparse.ArgumentTypeError(f"-E must be an exit code from 0 to 255, got {text!r}")
    return value


def command(args: argparse.Namespace) -> int:
    """Run ``redlease run``: see the module and ``--help`` for the behaviour and exit codes."""
    name: str = args.name
    client, url = args.client, args.url
    if args.every is not None and args.timeout not in (None, 0.0):
        raise CliError("--timeout has no meaning with --every: a run never waits", EX_USAGE)
    check_connection(client, url)
    child = Child(name, "lock" if args.every is None else "the run of")
    if args.every is not None:
        return _run_once(args, child)
    try:
        lock = redlease.Lock(client, name, ttl=args.ttl, prefix=args.prefix, on_lost=child.on_lost)
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc), EX_USAGE) from exc
    with signals_to(child.on_signal):
        try:
            acquired = lock.acquire(timeout=args.timeout)
            child.deferring = True  # from here on a signal is kept for the child
        except Interrupted as exc:
            child.finish()
            if lock.fence is not None:  # the signal came just after the lock was taken
                _release(lock, child, url)
            return 128 + exc.signum
        except redlease.LockUnavailable as exc:
            raise unavailable(url, exc) from exc
        if not acquired:
            child.finish()
            if args.verbose:
                waited = "" if not args.timeout else f" for {args.timeout:g} s"
                _skipped(f"lock {name!r} is held by another{waited}")
            return int(args.conflict_exit_code)
        env = {**os.environ, "REDLEASE_LOCK": name, "REDLEASE_FENCE": str(lock.fence)}
        try:
            code = run_command(child, args.command, env)
        finally:
            child.finish()
            lost_at_release = _release(lock, child, url)
    return EX_LOST if child.lost or lost_at_release else code


def _run_once(args: argparse.Namespace, child: Child) -> int:
    """``run --every``: run the command as a run of a :class:`redlease.Once`, or skip it."""
    name: str = args.name
    url = args.url
    once = redlease.Once(
        args.client, name, every=args.every, ttl=args.ttl, prefix=args.prefix, on_lost=child.on_lost
    )
    with signals_to(child.on_signal):
        try:
            run = once.try_start()
            child.deferring = True  # from here on a signal is kept for the child
        except Interrupted as exc:  # a run started just before the signal frees within ttl
            child.finish()
            return 128 + exc.signum
        except redlease.ForeignData as exc:
            raise CliError(f"once {name!r}: {exc} (choose another NAME or --prefix)", 1) from exc
        except redlease.OnceUnavailable as exc:
            raise unavailable(url, exc) from exc
        if run is None:
            child.finish()
            if args.verbose:
                _skipped(_why_skipped(once, url))
            return int(args.conflict_exit_code)
        env = {**os.environ, "REDLEASE_LOCK": name, "REDLEASE_FENCE": str(run.fence)}
        code: int | None = None
        try:
            code = run_command(child, args.command, env)
        finally:
            child.finish()
            lost_at_end = _end_run(run, code == 0 and not child.lost, child, url)
    return EX_LOST if child.lost or lost_at_end else code


def _why_skipped(once: redlease.Once, url: str) -> str:
    """The reason a run was skipped, from the last run's record (for ``-v``)."""
    try:
        last = once.last()
    except redlease.OnceUnavailable as exc:
        return f"{once.name!r} is running or ran within its period ({unavailable(url, exc)})"
    if last is None:
        return f"{once.name!r} is running or ran within its period"
    who = f"{last.host} (pid {last.pid})"
    if last.state == "running":
        return f"{once.name!r} is running on {who} (run {last.fence})"
    return (
        f"{once.name!r} ran on {who} (run {last.fence}, {last.state}); free in {last.free_in:g} s"
    )


def _end_run(run: redlease.OnceRun, success: bool, child: Child, url: str) -> bool:
    """Record the run's outcome; True if its lease turned out to be lost (a warning says so)."""
    try:
        if success:
            run.finish()
        else:
            run.fail()
    except redlease.RunLost:
        if not child.lost:
            warn(
                f"the run of {run.name!r} lost its lease before the command ended: another "
                "host may have run it too"
            )
        return True
    except redlease.OnceUnavailable as exc:
        warn(
            f"could not record the run's outcome ({unavailable(url, exc)}); {run.name!r} is "
            f"free again within its ttl ({run.once.ttl:g} s)"
        )
    return False


def _skipped(why: str) -> None:
    print(f"{PROG}: {why}: command not run", file=sys.stderr)


def _release(lock: redlease.Lock, child: Child, url: str) -> bool:
    """Release the lock; True if it turned out to be lost (a warning says so, once)."""
    try:
        lock.release()
    except redlease.LockLost:
        if not child.lost:
            warn(
                f"lock {lock.name!r} was lost before the command ended (its lease ran out or "
                "it was taken): another holder may have overlapped with it"
            )
        return True
    except redlease.LockUnavailable as exc:
        warn(
            f"could not release the lock ({unavailable(url, exc)}); it frees itself "
            f"within its ttl ({lock.ttl:g} s)"
        )
    return False
