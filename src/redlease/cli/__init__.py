"""The ``redlease`` command: hold a lock around a command, look at a lock, watch a demo.

::

    redlease run nightly-report --timeout 0 -- ./make-report.sh     # like flock(1), across hosts
    redlease inspect nightly-report --json
    redlease top --interval 2
    redlease demo

Global options (before or after the subcommand): ``--url`` (default ``$REDLEASE_URL``, else
``redis://127.0.0.1:6379``; ``demo`` starts a private server instead), ``--cluster``,
``--sentinel`` / ``--service``, ``--tls-ca-cert`` / ``--tls-cert`` / ``--tls-key`` (every
topology is one URL in the end, ``redis+cluster://`` or ``redis+sentinel://`` for
the last two) and ``--prefix``.

Exit codes shared by the subcommands: 2 bad arguments, 69 (``EX_UNAVAILABLE``) Redis could not
be reached or failed, 141 stdout was closed by its reader (quietly, as Unix tools do). ``run``
adds its own (see ``redlease run --help``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

import redis

import redlease

from . import demo, inspect, release, run, top
from ._common import DEFAULT_URL, EX_UNAVAILABLE, EX_USAGE, PROG, URL_ENV, CliError, global_options
from ._connection import (
    close_client,
    make_client,
    parse_url,
    resolve_url,
    tls_url,
    topology_url,
    unavailable,
)

__all__ = ["EX_PIPE", "build_parser", "main"]

EX_PIPE = 141
"""stdout was closed by its reader (a pipe into ``head``): 128 + SIGPIPE, as a shell reports
a tool that SIGPIPE stopped."""

_DESCRIPTION = """\
Distributed locks on Redis, from the command line.

  redlease run NAME [--timeout S] -- COMMAND...   hold lock NAME while COMMAND runs
  redlease inspect NAME [--json]                  is NAME held? fence, waiters
  redlease inspect NAME [--kind KIND]             any primitive: its kind is found
  redlease inspect --all [--limit N] [--json]     every primitive under --prefix (SCAN)
  redlease inspect NAME --url A --url B --url C   a Redlock over those servers
  redlease release NAME --force [--token T]       break-glass: evict NAME's holder
  redlease top [--interval S] [--match GLOB]      a live view of what is held and awaited
  redlease demo [--counter]                       a flash sale raced by processes: naive,
                                                  WATCH, lock and atomic compared

Connection: --url, else $REDLEASE_URL, else redis://127.0.0.1:6379 (run, inspect, top); demo
starts a private embedded server when neither is given. URLs: redis://[[user]:password@]host
[:port][/db], rediss://... for TLS, unix:///path/to/socket; query parameters are passed to
redis-py (e.g. ?socket_connect_timeout=10, ?ssl_ca_certs=ca.pem&ssl_certfile=client.pem
&ssl_keyfile=client.key). A Redis Cluster: --cluster, or redis+cluster://node:port. Sentinel:
--sentinel HOST:PORT (repeated) --service NAME, or redis+sentinel://HOST:PORT,.../NAME[/db].

Exit codes: 2 bad arguments, 69 Redis unreachable or failing; see each subcommand's --help.
"""


def build_parser() -> argparse.ArgumentParser:
    """The ``redlease`` argument parser with its subcommands."""
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
    for module in (run, inspect, release, top, demo):
        module.add_parser(subparsers)
    return parser


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
    except CliError as exc:  # a cluster client asks a node for its slots when made
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return exc.code
    try:
        code: int = args.handler(args)
        sys.stdout.flush()  # a closed pipe shows here, not at exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
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
            close_client(args.client)


def _closed_pipe() -> int:
    """The reader of stdout went away (``redlease inspect --all | head``): stop quietly, as
    Unix tools do, with the code a shell reports for SIGPIPE (128 + 13). Later writes (the
    flush at exit) go to /dev/null, so no traceback is printed either."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return EX_PIPE


def _finish_args(args: argparse.Namespace, tail: list[str] | None) -> None:
    """Attach the command after ``--``, resolve the URL and build the client (no I/O, but a
    cluster client asks a node for the map of slots)."""
    sub: argparse.ArgumentParser = args.subparser
    if tail is not None:
        if not hasattr(args, "command"):
            sub.error(f"unrecognized arguments: -- {' '.join(tail)}".rstrip())
        # `run NAME echo a -- b`: the "--" belongs to the command.
        args.command = [*args.command, "--", *tail] if args.command else tail
    if hasattr(args, "command") and not args.command:
        sub.error("a COMMAND to run is required, after --")
    explicit = args.url
    args.client = None
    url = _connection_url(args, sub)
    args.url = url
    if url is not None:
        # A renewal stuck on a hung server must not outlast much of the lease it renews.
        ttl = getattr(args, "ttl", None)
        timeout = 5.0 if ttl is None else max(0.05, min(5.0, ttl / 3))
        try:
            args.client = make_client(url, timeout=timeout)
        except ValueError as exc:
            sub.error(f"{'argument --url' if explicit else '$' + URL_ENV}: {exc}")


def _connection_url(args: argparse.Namespace, sub: argparse.ArgumentParser) -> str | None:
    """The one URL naming the topology (``--cluster``, ``--sentinel`` and ``--tls-*`` written
    into it, see :func:`redlease.cli._connection.parse_url`), or None (demo: a private server)."""
    explicit = args.url
    tls = {k: getattr(args, k) for k in ("tls_ca_cert", "tls_cert", "tls_key")}
    try:
        if args.sentinel or args.service:  # the sentinels say where; --url only how (no host)
            url: str | None = topology_url(
                explicit or "redis://",
                cluster=args.cluster,
                sentinels=args.sentinel,
                service=args.service,
            )
        else:
            url = resolve_url(explicit, default=getattr(args, "default_url", DEFAULT_URL))
            if url is not None:
                url = topology_url(url, cluster=args.cluster, sentinels=(), service=None)
            elif args.cluster or any(tls.values()):
                raise ValueError("--cluster and --tls-* need --url (or $REDLEASE_URL)")
        url = url if url is None else tls_url(url, tls)
    except ValueError as exc:
        sub.error(str(exc))
    if url is not None:
        try:
            parse_url(url)
        except ValueError as exc:
            where = "argument --url" if explicit or args.sentinel else "$" + URL_ENV
            sub.error(f"{where}: {exc}")
    return url
