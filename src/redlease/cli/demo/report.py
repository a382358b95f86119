"""How the demos show what happens: live progress on stderr, percentiles, tables."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TextIO

__all__ = ["Progress", "percentile", "table"]


def percentile(ordered: Sequence[float], p: float) -> float:
    """Nearest-rank percentile ``p`` (0-100) of the sorted, non-empty ``ordered``."""
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def table(rows: Sequence[Sequence[str]], out: TextIO, *, indent: str = "  ") -> None:
    """Print ``rows`` (the first is the header) as columns: the first left-aligned, the
    others right-aligned, three spaces apart."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [row[0].ljust(widths[0])]
        cells += [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        print(indent + "   ".join(cells).rstrip(), file=out)


EVERY = 2.0
"""Seconds between two progress lines when stderr is not a terminal (a log, a pipe)."""


class Progress:
    """Live progress on stderr: one rewritten line on a terminal; elsewhere a plain line every
    :data:`EVERY` seconds, so that a long phase is never silent."""

    def __init__(self, stream: TextIO) -> None:
        """Write to ``stream``; in-place updates only if it is a terminal."""
        self.stream = stream
        self.tty = stream.isatty()
        self._width = 0
        self._last = time.monotonic()

    def update(self, text: str) -> None:
        """Show ``text`` in place of the current progress line (elsewhere: every few s)."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width))
            self.stream.flush()
            self._width = len(text)
        elif time.monotonic() - self._last >= EVERY:
            self.line(text)

    def line(self, text: str) -> None:
        """Print ``text`` as a line of its own, replacing any progress line."""
        if self.tty:
            self.stream.write("\r" + text.ljust(self._width) + "\n")
            self._width = 0
        else:
            self.stream.write(text + "\n")
        self.stream.flush()
        self._last = time.monotonic()
