"""``redlease inspect NAME``: whether a lock is held, its lease, fencing counter and waiters."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from typing import Any

import redis

from .._core.lock import LockKeys
from ._common import (
    DEFAULT_URL,
    CliError,
    check_connection,
    global_options,
    handler_defaults,
    lock_name,
    unavailable,
)

__all__ = ["LockState", "add_parser", "command", "read_state"]

_DESCRIPTION = """\
Show the state of lock NAME, read atomically: held or free, the lease left on it, the
fencing counter (the last fencing token issued: the next holder gets a larger one) and the
number of waiters queued for it (one that died stays counted until it is skipped).

Exit code 0 whether the lock is held or free; 1 if its keys hold data redlease did not
write; 69 if Redis cannot be reached.

--json prints one object:
  {"name": str, "key": str, "held": bool, "remaining": float | null, "fence": int,
   "waiters": int}
"remaining" is the lease left in seconds: null when the lock is free (or, for a key set
outside redlease, has no expiry).
"""


def add_parser(subparsers: Any) -> None:
    """Add the ``inspect`` subcommand to ``subparsers``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "inspect",
        parents=[global_options(url_default=DEFAULT_URL)],
        help="show whether a lock is held, its lease, fence and waiters",
        description=_DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("name", type=lock_name, metavar="NAME", help="the lock's name")
    parser.add_argument("--json", action="store_true", help="print JSON instead of text")
    handler_defaults(parser, command)


@dataclass(frozen=True)
class LockState:
    """What ``inspect`` reports about one lock."""

    name: str
    key: str
    held: bool
    remaining: float | None
    fence: int
    waiters: int


def read_state(client: redis.Redis, prefix: str, name: str) -> LockState:
    """Read the lock's keys in one MULTI/EXEC: PTTL of the lock, its fence, its queue size.

    Raises :class:`~redlease.cli.CliError` (exit 1) if the fencing counter is not a number,
    and redis-py's errors.
    """
    keys = LockKeys.build(prefix, name.encode())
    with client.pipeline(transaction=True) as pipe:
        pipe.pttl(keys.lock)
        pipe.get(keys.fence)
        pipe.zcard(keys.queue)
        pttl, fence, waiters = pipe.execute()
    try:
        counter = int(fence or 0)
    except ValueError:
        raise CliError(
            f"the fencing counter of lock {name!r} is not a number: {fence!r}", 1
        ) from None
    return LockState(
        name=name,
        key=keys.lock.decode(errors="replace"),
        held=int(pttl) != -2,
        remaining=int(pttl) / 1000 if int(pttl) >= 0 else None,
        fence=counter,
        waiters=int(waiters),
    )


def format_text(state: LockState) -> str:
    """The human-readable report: one ``label  value`` line per fact."""
    if not state.held:
        status, remaining = "free", "-"
    elif state.remaining is None:
        status, remaining = "held", "no expiry (the key was not set by redlease?)"
    else:
        status, remaining = "held", f"{state.remaining:.3f} s"
    fence = f"{state.fence} (last token issued)" if state.fence else "0 (never acquired)"
    rows = [
        ("lock", state.name),
        ("key", state.key),
        ("state", status),
        ("remaining", remaining),
        ("fence", fence),
        ("waiters", str(state.waiters)),
    ]
    return "\n".join(f"{label:<10} {value}" for label, value in rows)


def command(args: argparse.Namespace) -> int:
    """Run ``redlease inspect``: print the state; exit 0 whether held or free."""
    check_connection(args.client, args.url)
    try:
        state = read_state(args.client, args.prefix, args.name)
    except redis.ResponseError as exc:  # e.g. WRONGTYPE: a key of that name is not ours
        raise CliError(f"cannot read lock {args.name!r}: {exc}", 1) from exc
    except (redis.RedisError, OSError) as exc:
        raise unavailable(args.url, exc) from exc
    if args.json:
        json.dump(asdict(state), sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_text(state))
    return 0
