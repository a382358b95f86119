"""The command line: the options the benchmarks share, and the lists they take."""

from __future__ import annotations

import argparse
import sys


def parser(doc: str | None, *, paragraph: bool = True) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of ``doc`` (its first line with
    ``paragraph=False``)."""
    text = doc or ""
    return argparse.ArgumentParser(description=text.split("\n\n" if paragraph else "\n")[0])


def add_url(p: argparse.ArgumentParser, help: str | None = None) -> None:
    """``--url``: a server to use instead of a private one."""
    p.add_argument(
        "--url", help=help or "use this server instead of starting one (redis://host:port)"
    )


def add_quick(p: argparse.ArgumentParser, help: str = "short smoke run (small samples)") -> None:
    p.add_argument("--quick", action="store_true", help=help)


def add_json(p: argparse.ArgumentParser, help: str = "write the raw figures to FILE") -> None:
    p.add_argument("--json", metavar="FILE", help=help)


def add_sections(p: argparse.ArgumentParser, sections: str, help: str | None = None) -> None:
    """``--sections``: a comma-separated subset of ``sections`` (all by default)."""
    p.add_argument(
        "--sections", default=sections, help=help or f"subset of the sections {sections} to run"
    )


def sections(text: str) -> set[str]:
    """The sections of ``--sections``."""
    return {s.strip() for s in text.split(",")}


def numbers(text: str) -> tuple[int, ...]:
    """A comma-separated list of integers (empty items skipped)."""
    return tuple(int(x) for x in text.split(",") if x.strip())


def pick_libs(text: str, known: dict[str, str]) -> list[str] | None:
    """The comma-separated libraries of ``--libs``; None (and a message) if one is unknown."""
    libs = [x.strip() for x in text.split(",") if x.strip()]
    unknown = [x for x in libs if x not in known]
    if unknown:
        print(f"unknown libraries: {unknown}; choose from {list(known)}", file=sys.stderr)
        return None
    return libs
