"""The ``redlease`` command: hold a lock around a command, look at a lock, watch a demo.

::

    redlease run nightly-report --timeout 0 -- ./make-report.sh     # like flock(1), across hosts
    redlease inspect nightly-report --json
    redlease demo

Global options (before or after the subcommand): ``--url`` (default ``$REDLEASE_URL``, else
``redis://127.0.0.1:6379``; ``demo`` starts a private server instead) and ``--prefix``.

Exit codes shared by the subcommands: 2 bad arguments, 69 (``EX_UNAVAILABLE``) Redis could not
be reached or failed. ``run`` adds its own (see ``redlease run --help``).
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

import redlease

__all__ = [
    "DEFAULT_URL",
    "EX_LOST",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "URL_ENV",
    "CliError",
    "build_parser",
    "check_connection",
    "global_options",
    "main",
    "make_client",
    "redact",
]

EX_USAGE = 2
"""Bad arguments (argparse's code)."""
EX_UNAVAILABLE = 69
"""sysexits EX_UNAVAILABLE: Redis could not be reached, refused us, or failed."""
EX_LOST = 70
"""sysexits EX_SOFTWARE: ``run`` lost the lock while the command ran (it was terminated)."""
EX_TEMPFAIL = 75
"""sysexits EX_TEMPFAIL: ``run`` could not get the lock within --timeout; nothing was run."""

DEFAULT_URL = "redis://127.0.0.1:6379"
URL_ENV = "REDLEASE_URL"
PROG = "redlease"

_MAX_TTL = 30 * 24 * 3600.0  # the library refuses longer leases (a unit mistake, surely)


class CliError(Exception):
    """A failure to report as one line on stderr, with the exit code to return."""

    def __init__(self, message: str, code: int) -> None:
        """Keep ``message`` on one line and remember ``code``."""
        super().__init__(" ".join(message.split()))
        self.code = code


# -- argument types ---------------------------------------------------------------------------


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if math.isnan(value):
        raise argparse.ArgumentTypeError("not a number of seconds: NaN")
    return value


def positive_seconds(text: str) -> float:
    """argparse type of a lease: a number of seconds, > 0 and at most 30 days."""
    value = _seconds(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0 seconds, got {text}")
    if value > _MAX_TTL:
        raise argparse.ArgumentTypeError(f"must be at most 30 days ({_MAX_TTL:.0f} s), got {text}")
    return value


def nonnegative_seconds(text: str) -> float:
    """argparse type of a wait: a number of seconds >= 0 (``inf``: forever)."""
    value = _seconds(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0 seconds, got {text}")
    return value


def positive_int(text: str) -> int:
    """argparse type of a count: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {text}")
    return value


def lock_name(text: str) -> str:
    """argparse type of a lock name: non-empty, valid UTF-8."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    try:
        text.encode()
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"not valid UTF-8: {text!r}") from None
    return text


def key_prefix(text: str) -> str:
    """argparse type of a key prefix: non-empty, no white space, no braces (as the library)."""
    if not text:
        raise argparse.ArgumentTypeError("must not be empty")
    if any(c.isspace() for c in text) or "{" in text or "}" in text:
        raise argparse.ArgumentTypeError(f"must not contain white space or braces, got {text!r}")
    return text


# -- connections --------------------------------------------------------------------------------


def redact(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``, fit for messages."""
    try:
        parts = urlsplit(url)
        if parts.password is None:
            return url
        user = parts.username or ""
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        if parts.port is not None:
            host = f"{host}:{parts.port}"
        return urlunsplit(parts._replace(netloc=f"{user}:***@{host}"))
    except ValueError:
        return "<the given URL>"


def make_client(url: str, *, timeout: float = 5.0) -> redis.Redis:
    """A client for ``url`` (nothing is sent yet); ``ValueError`` if the URL is malformed.

    Client-side retries are off, and connecting and each reply are limited to ``timeout``
    seconds (unless the URL's query says otherwise, e.g. ``?socket_timeout=10``): a command
    line tool should fail fast, and a lock's watchdog must not hang on a dead server.
    """
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=timeout,
        socket_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


def check_connection(client: redis.Redis, url: str) -> None:
    """PING through ``client``; :class:`CliError` (exit 69) naming the URL if that fails."""
    try:
        client.ping()
    except (redis.RedisError, OSError) as exc:
        raise unavailable(url, exc) from exc


def unavailable(url: str, exc: BaseException) -> CliError:
    """The error to report when Redis at ``url`` could not be reached or failed."""
    cause = exc.__cause__ if isinstance(exc, redlease.LockUnavailable) else None
    detail = str(cause or exc) or type(exc).__name__
    return CliError(f"cannot use Redis at {redact(url)}: {detail}", EX_UNAVAILABLE)


# -- parser -------------------------------------------------------------------------------------

_DESCRIPTION = """\
Distributed locks on Redis, from the command line.

  redlease run NAME [--timeout S] -- COMMAND...   hold lock NAME while COMMAND runs
  redlease inspect NAME [--json]                  is NAME held? fence, waiters
  redlease demo [--counter]                       a flash sale raced by processes: naive,
                                                  WATCH, lock and atomic compared

Connection: --url, else $REDLEASE_URL, else redis://127.0.0.1:6379 (run, inspect); demo
starts a private embedded server when neither is given. URLs: redis://[[user]:password@]host
[:port][/db], rediss://... for TLS, unix:///path/to/socket; query parameters are passed to
redis-py (e.g. ?socket_connect_timeout=10).

Exit codes: 2 bad arguments, 69 Redis unreachable or failing; see each subcommand's --help.
"""


def global_options(*, url_default: str | None = None) -> argparse.ArgumentParser:
    """A parent parser with ``--url`` and ``--prefix``, for the main parser and subcommands.

    ``url_default`` describes the subcommand's default URL in its help (``None``: the main
    parser, whose defaults are real values; subcommands use SUPPRESS so an option given only
    before the subcommand is not reset by the subcommand's default).
    """
    top = url_default is None
    default_text = f"{DEFAULT_URL}; demo: a private server" if url_default is None else url_default
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument(
        "--url",
        metavar="URL",
        default=None if top else argparse.SUPPRESS,
        help=f"Redis URL (default: ${URL_ENV}, else {default_text})",
    )
    parser.add_argument(
        "--prefix",
        type=key_prefix,
        metavar="PREFIX",
        default="redlease" if top else argparse.SUPPRESS,
        help="key prefix of the locks, as given to redlease.Lock (default: redlease)",
    )
    return parser


def build_parser() -> argparse.ArgumentParser:
    """The ``redlease`` argument parser with its subcommands."""
    from . import demo, inspect, run  # here: each subcommand module imports this one

    parser = argparse.ArgumentParser(
        prog=PROG,
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        parents=[global_options()],
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {redlease.__version__}")
    subparsers = parser.add_subparsers(
        title="subcommands", dest="subcommand", metavar="SUBCOMMAND", required=True
    )
    for module in (run, inspect, demo):
        module.add_parser(subparsers)
    return parser


def resolve_url(explicit: str | None, *, default: str | None) -> str | None:
    """The URL to use: ``--url``, else ``$REDLEASE_URL`` (if not empty), else ``default``."""
    if explicit:
        return explicit
    return os.environ.get(URL_ENV) or default


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``redlease`` command line with ``argv`` (default ``sys.argv[1:]``).

    Returns the exit code instead of calling ``sys.exit`` (also for bad arguments and
    ``--help``), so it can be called in-process.
    """
    arguments = list(sys.argv[1:] if argv is None else argv)
    # Everything after the first "--" is the command of `run`, verbatim (argparse would parse
    # the options in it, or REMAINDER would swallow run's own options).
    tail: list[str] | None = None
    if "--" in arguments:
        cut = arguments.index("--")
        arguments, tail = arguments[:cut], arguments[cut + 1 :]
    parser = build_parser()
    try:
        args = parser.parse_args(arguments)
        _finish_args(args, tail)
    except SystemExit as exc:  # argparse: bad arguments (2), --help / --version (0)
        return exc.code if isinstance(exc.code, int) else EX_USAGE
    try:
        code: int = args.handler(args)
        return code
    except CliError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    except (redlease.LockUnavailable, redis.RedisError) as exc:  # Redis failed mid-way
        print(f"{PROG}: error: {unavailable(args.url or '?', exc)}", file=sys.stderr)
        return EX_UNAVAILABLE
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    finally:
        if args.client is not None:
            args.client.close()


def _finish_args(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Attach the command after ``--``, resolve the URL and build the client (no I/O)."""
    sub: argparse.ArgumentParser = args.subparser
    if tail is not None:
        if not hasattr(args, "command"):
            sub.error(f"unrecognized arguments: -- {' '.join(tail)}".rstrip())
        # `run NAME echo a -- b`: the "--" belongs to the command.
        args.command = [*args.command, "--", *tail] if args.command else tail
    if hasattr(args, "command") and not args.command:
        sub.error("a COMMAND to run is required, after --")
    explicit = args.url
    url = resolve_url(explicit, default=getattr(args, "default_url", DEFAULT_URL))
    args.url = url
    args.client = None
    if url is not None:
        # A renewal stuck on a hung server must not outlast much of the lease it renews.
        ttl = getattr(args, "ttl", None)
        timeout = 5.0 if ttl is None else max(0.05, min(5.0, ttl / 3))
        try:
            args.client = make_client(url, timeout=timeout)
        except ValueError as exc:
            sub.error(f"{'argument --url' if explicit else '$' + URL_ENV}: {exc}")


def handler_defaults(parser: argparse.ArgumentParser, handler: Any, **extra: Any) -> None:
    """Record on ``parser`` the function that runs its subcommand, and extra defaults."""
    parser.set_defaults(handler=handler, subparser=parser, **extra)
