"""What a benchmark prints and writes: aligned tables, PASS/FAIL verdicts, section headers,
the mutual-exclusion banner, error rows and the JSON file of every figure."""

from __future__ import annotations

import json
from typing import Any


def error_text(exc: BaseException) -> str:
    """An exception as one line of at most 300 characters."""
    return " ".join(f"{type(exc).__name__}: {exc}".split())[:300]


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def fmt(value: Any, spec: str) -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and value != value:
        return "nan"
    return format(value, spec)


def print_table(
    headers: list[str],
    rows: list[list[str]],
    aligns: str | None = None,
    *,
    indent: str = "",
    gap: str = "  ",
    rule: bool = True,
) -> None:
    """Columns as wide as their widest cell, ``aligns`` one ``l``/``r`` per column (the first
    left, the others right by default); a row of two cells where more are expected is an
    error row: its name, then its message. ``rule``: a line of dashes under the headers."""
    full = [r for r in rows if len(r) == len(headers)]
    widths = [max([len(h), *(len(r[i]) for r in full)]) for i, h in enumerate(headers)]
    aligns = aligns or "l" + "r" * (len(headers) - 1)

    def line(cells: list[str]) -> str:
        out = []
        for i, c in enumerate(cells):
            out.append(c.ljust(widths[i]) if aligns[i] == "l" else c.rjust(widths[i]))
        return (indent + gap.join(out)).rstrip()

    print(line(headers))
    if rule:
        print(line(["-" * w for w in widths]))
    for r in rows:
        if len(r) != len(headers):  # an error row: name and message
            print(f"{indent}{r[0].ljust(widths[0])}{gap}{r[1]}")
        else:
            print(line(r))


def print_section(title: str) -> None:
    print()
    print(title)


def print_header(title: str, quick: bool) -> None:
    print_section(title)
    if quick:
        print("QUICK RUN: small samples, figures are indicative only")


def error_row(label: str, row: dict[str, Any]) -> list[str]:
    return [label, f"ERROR: {row['error']}"]


def exclusion_verdict(
    row: dict[str, Any], label: str, key: str, loud: list[str], failed: list[str]
) -> str:
    """A contended row's exclusion cell; overlapping holds also go to the banner (``loud``,
    under ``label``) and to the failed targets (under ``key``)."""
    if row["violations"]:
        loud.append(f"{label}: {row['violations']} overlapping holds")
        failed.append(f"mutual exclusion {key}")
    excl = "OK" if row["violations"] == 0 else f"VIOLATED x{row['violations']}"
    return excl + (" (worker error)" if "error" in row else "")


def print_violations(loud: list[str]) -> None:
    """A banner naming every mutual-exclusion failure (nothing if there is none)."""
    if loud:
        print()
        print("!" * 78)
        for text in loud:
            print(f"!!! MUTUAL EXCLUSION VIOLATED: {text}")
        print("!" * 78)


def write_json(path: str, data: dict[str, Any], *, note: bool = True, indent: int = 1) -> None:
    """Every figure of the run to ``path`` (``note``: say so on stdout)."""
    with open(path, "w") as fh:
        json.dump(data, fh, indent=indent, default=str)
    if note:
        print(f"raw figures written to {path}")
