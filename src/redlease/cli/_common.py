"""What the ``redlease`` subcommands share: exit codes, argument types, the global options.

Every CLI module imports from here (never from :mod:`redlease.cli`, which imports them):
the exit codes and :class:`CliError`, the argparse types (which apply the library's own
checks, :mod:`redlease._core.validate`, so the command line and the library accept exactly
the same values), the global options and the ``handler_defaults`` each subcommand records
its handler with. URLs and clients are :mod:`._connection`'s.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, TypeVar

from .._core import validate
from ._urls import SubcommandUrls, Urls

__all__ = [
    "DEFAULT_URL",
    "EX_LOST",
    "EX_TEMPFAIL",
    "EX_UNAVAILABLE",
    "EX_USAGE",
    "PROG",
    "URL_ENV",
    "CliError",
    "count",
    "global_options",
    "handler_defaults",
    "key_prefix",
    "lease_seconds",
    "lock_name",
    "wait_seconds",
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


class CliError(Exception):
    """A failure to report as one line on stderr, with the exit code to return."""

    def __init__(self, message: str, code: int) -> None:
        """Keep ``message`` on one line and remember ``code``."""
        super().__init__(" ".join(message.split()))
        self.code = code


# -- argument types ---------------------------------------------------------------------------
# Each parses the text, then hands the value to the library's check: its ValueError / TypeError
# becomes argparse's error with the same message (argparse prefixes "argument --ttl: ").

_T = TypeVar("_T")


def _checked(check: Callable[[], _T]) -> _T:
    try:
        return check()
    except (TypeError, ValueError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _seconds(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None


def _utf8(text: str) -> str:
    # A byte sequence on the command line that is not UTF-8 arrives as lone surrogates
    # (surrogateescape): refuse it here with a message, before str.encode() fails bare.
    try:
        text.encode()
    except UnicodeEncodeError:
        raise argparse.ArgumentTypeError(f"not valid UTF-8: {text!r}") from None
    return text


def lease_seconds(text: str) -> float:
    """argparse type of a lease (``--ttl``): seconds, as ``Lock(ttl=...)`` accepts them
    (at least ``MIN_LEASE``, at most 30 days)."""
    value = _seconds(text)
    _checked(lambda: validate.lease_ms(value))
    return value


def wait_seconds(text: str) -> float | None:
    """argparse type of a wait (``--timeout``): seconds >= 0, as ``acquire(timeout=...)``.

    ``-1`` and ``inf`` wait forever (``None``), as in the library.
    """
    value = _seconds(text)
    return _checked(lambda: validate.timeout(value))


def lock_name(text: str) -> str:
    """argparse type of a lock name: what ``Lock(name=...)`` accepts (non-empty, UTF-8)."""
    _checked(lambda: validate.name(_utf8(text)))
    return text


def key_prefix(text: str) -> str:
    """argparse type of a key prefix: what ``Lock(prefix=...)`` accepts (no blanks, braces)."""
    return _checked(lambda: validate.prefix(_utf8(text)))


def count(arg: str, *, minimum: int = 1) -> Callable[[str], int]:
    """An argparse type of a whole count named ``arg`` (in messages), at least ``minimum``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        return _checked(lambda: validate.count(value, arg, minimum=minimum))

    return parse


# -- parsers ------------------------------------------------------------------------------------


def global_options(*, url_default: str | None = None) -> argparse.ArgumentParser:
    """A parent parser with the connection options (``--url``, ``--cluster``, ``--sentinel``,
    ``--service``, ``--tls-*``) and ``--prefix``, for the main parser and subcommands.

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
        action=Urls if top else SubcommandUrls,
        default=None if top else argparse.SUPPRESS,
        help=f"Redis URL (default: ${URL_ENV}, else {default_text}); inspect: several, a Redlock",
    )
    parser.add_argument(
        "--cluster",
        action="store_true",
        default=False if top else argparse.SUPPRESS,
        help="the URL names a node of a Redis Cluster (same as a redis+cluster:// URL)",
    )
    parser.add_argument(
        "--sentinel",
        action="append",
        metavar="HOST:PORT",
        default=[] if top else argparse.SUPPRESS,
        help="a sentinel to ask for the master of --service (repeat for each; same as "
        "redis+sentinel://HOST:PORT,.../SERVICE); --url then gives only the master's "
        "settings, without a host (e.g. redis://:PASSWORD@/0)",
    )
    parser.add_argument(
        "--service",
        metavar="NAME",
        default=None if top else argparse.SUPPRESS,
        help="the Sentinel service name (the master's name, e.g. mymaster)",
    )
    for option, setting, what in (
        ("--tls-ca-cert", "ssl_ca_certs", "the CA certificate(s) to trust (PEM)"),
        ("--tls-cert", "ssl_certfile", "the client certificate (PEM)"),
        ("--tls-key", "ssl_keyfile", "the client certificate's private key (PEM)"),
    ):
        parser.add_argument(
            option,
            metavar="FILE",
            default=None if top else argparse.SUPPRESS,
            help=f"{what}; a rediss:// URL's ?{setting}=FILE",
        )
    parser.add_argument(
        "--prefix",
        type=key_prefix,
        metavar="PREFIX",
        default="redlease" if top else argparse.SUPPRESS,
        help="key prefix of the locks, as given to redlease.Lock (default: redlease)",
    )
    return parser


def handler_defaults(parser: argparse.ArgumentParser, handler: Any, **extra: Any) -> None:
    """Record on ``parser`` the function that runs its subcommand, and extra defaults."""
    parser.set_defaults(handler=handler, subparser=parser, **extra)
