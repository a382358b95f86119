"""``redlease inspect NAME --kind ratelimit --subject KEY --rate RATE``: a subject's limits.

A rate limiter keeps no description of itself in Redis (only each subject's counters), so the
limits and the algorithm come from the command line, as the application gives them. The state
is read with :meth:`redlease.RateLimiter.peek`: what a hit of cost 1 would get now, taking
nothing.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

import redlease

from ._common import CliError
from ._connection import unavailable

__all__ = ["add_arguments", "command", "format_text", "report"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``--kind ratelimit``."""
    group = parser.add_argument_group("with --kind ratelimit")
    group.add_argument("--subject", help="the subject (key) whose limits to show")
    group.add_argument("--rate", help="the limiter's limits, e.g. '100/minute;5000/day'")
    group.add_argument(
        "--algorithm",
        default="fixed",
        help="fixed (default), sliding, gcra or token_bucket",
    )


def report(limiter: redlease.RateLimiter, subject: str) -> dict[str, Any]:
    """The ``--json`` object: what ``limiter.peek(subject)`` answers, one entry per limit."""
    answer = limiter.peek(subject)
    return {
        "name": str(limiter.name),
        "kind": "ratelimit",
        "subject": subject,
        "algorithm": limiter.algorithm,
        "allowed": answer.allowed,
        "limits": [
            {
                "rate": str(rate),
                "limit": each.limit,
                "window": each.window,
                "allowed": each.allowed,
                "remaining": each.remaining,
                "retry_after": each.retry_after,
                "reset_after": each.reset_after,
            }
            for rate, each in zip(limiter.rates, answer.limits, strict=True)
        ],
    }


def format_text(state: dict[str, Any]) -> str:
    """``report``'s state for a terminal: a header, then one line per limit."""
    lines = [
        f"ratelimit  {state['name']} ({state['algorithm']})",
        f"subject    {state['subject']}",
        f"next hit   {'allowed' if state['allowed'] else 'refused'}",
    ]
    for each in state["limits"]:
        wait = f", retry in {each['retry_after']:.3f} s" if not each["allowed"] else ""
        lines.append(
            f"limit      {each['rate']}: {each['remaining']} of {each['limit']} left{wait}, "
            f"reset in {each['reset_after']:.3f} s"
        )
    return "\n".join(lines)


def command(args: argparse.Namespace) -> int:
    """Print the subject's state under each limit; exit 0."""
    if args.subject is None or args.rate is None:
        raise CliError("--kind ratelimit needs --subject and --rate", 2)
    try:
        limiter = redlease.RateLimiter(
            args.client, args.name, rate=args.rate, algorithm=args.algorithm, prefix=args.prefix
        )
    except (TypeError, ValueError) as exc:
        raise CliError(str(exc), 2) from exc
    try:
        state = report(limiter, args.subject)
    except ValueError as exc:
        raise CliError(f"--subject: {exc}", 2) from exc
    except redlease.RateLimitUnavailable as exc:
        raise unavailable(args.url, exc) from exc
    if args.json:
        json.dump(state, sys.stdout)
        sys.stdout.write("\n")
    else:
        print(format_text(state))
    return 0
