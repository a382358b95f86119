"""``--url`` given several times: ``inspect`` over a Redlock's servers."""

from __future__ import annotations

import argparse
from typing import Any

__all__ = ["SubcommandUrls", "Urls", "all_urls"]


class Urls(argparse.Action):
    """``--url``: the last one given is ``url`` (the connection); all of them, in order, are
    ``urls`` (``inspect`` over a Redlock's servers): those before the subcommand, then
    those after it (kept apart, as argparse copies a subcommand's values over the others)."""

    where = "urls"

    def __call__(
        self, parser: Any, namespace: argparse.Namespace, values: Any, option: Any = None
    ) -> None:
        namespace.url = values
        setattr(namespace, self.where, [*getattr(namespace, self.where, []), values])


class SubcommandUrls(Urls):
    """``--url`` after the subcommand."""

    where = "subcommand_urls"


def all_urls(args: argparse.Namespace) -> list[str]:
    """Every ``--url`` given, in order, before and after the subcommand."""
    return [*getattr(args, "urls", []), *getattr(args, "subcommand_urls", [])]
