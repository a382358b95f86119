"""A bound on label cardinality: the first N distinct names, then ``"other"``."""

from __future__ import annotations

from .._synchronization import ProcessLock

__all__ = ["OTHER", "Names", "check_max_names"]

OTHER = "other"
"""The label of every lock name past the first ``max_names`` distinct ones."""


def check_max_names(value: object) -> int:
    """``max_names`` as given, checked: an int of at least 0."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"max_names must be an int, got {type(value).__name__}")
    if value < 0:
        raise ValueError(f"max_names must be 0 or more, got {value}")
    return value


class Names:
    """Maps lock names to label values: the first ``limit`` distinct names stay themselves
    (for good: a name is never demoted), every later name is :data:`OTHER`."""

    def __init__(self, limit: int) -> None:
        self.limit = check_max_names(limit)
        self._seen: set[str] = set()
        self._guard = ProcessLock()

    def __call__(self, name: str) -> str:
        if name in self._seen:
            return name
        with self._guard:
            if name in self._seen:
                return name
            if len(self._seen) < self.limit:
                self._seen.add(name)
                return name
        return OTHER
