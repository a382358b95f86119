"""How ``redlease inspect`` and ``release`` print a primitive: its ``--json`` object and its
``label  value`` lines, from the library's Info dataclasses (pure: no I/O)."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

__all__ = ["family_report", "format_family", "holder_text", "plain", "since_text"]


def holder_text(holder: dict[str, Any] | None) -> str:
    """``host:pid thread`` of a ``held_by`` object (``-`` for none; the token without an
    identity)."""
    if holder is None:
        return "-"
    if holder["host"] is None:
        return str(holder["token"])
    return f"{holder['host']}:{holder['pid']} {holder['thread']}"


def since_text(holder: dict[str, Any] | None) -> str:
    """When a ``held_by`` object's holder took it, in UTC (``-`` when unknown)."""
    if holder is None or holder["since"] is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(holder["since"]))


def plain(value: Any) -> Any:
    """``value`` as JSON can hold it: bytes decoded, tuples as lists, a Leader or a HolderInfo
    as an object."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {key: plain(item) for key, item in value._asdict().items()}
    if isinstance(value, tuple):
        return [plain(item) for item in value]
    return value


def family_report(info: Any, kind: str) -> dict[str, Any]:
    """The ``--json`` object of a family primitive's Info dataclass ``info`` (``kind`` named).

    ``mine`` is left out: the command line holds nothing.
    """
    fields = {f.name: plain(getattr(info, f.name)) for f in dataclasses.fields(info)}
    fields.pop("mine", None)
    name = fields.pop("name", "")
    return {"name": name, "kind": kind, **fields}


def format_family(state: dict[str, Any]) -> str:
    """The human-readable report of :func:`family_report`'s ``state``: ``label  value`` lines."""
    rows: list[tuple[str, str]] = []
    for label, value in state.items():
        if label == "held_by" and isinstance(value, list):
            text = "; ".join(holder_text(item) for item in value) if value else "-"
        elif label == "held_by":
            text = holder_text(value)
        elif isinstance(value, float):
            text = f"{value:.3f} s"
        elif label == "units" and isinstance(value, list):
            text = ", ".join(str(item) for item in value) if value else "-"
        elif isinstance(value, list):
            text = ", ".join(f"{item:.3f} s" for item in value) if value else "-"
        elif label == "fields" and isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in value.items()) if value else "-"
        elif isinstance(value, dict):
            text = f"{value['value']} (term {value['term']})"
        elif value is None:
            text = "-"
        else:
            text = str(value)
        rows.append((label, text))
    return "\n".join(f"{label:<10} {text}" for label, text in rows)
