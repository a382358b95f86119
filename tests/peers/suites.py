"""What the peers' own suites share: fetch a published sdist at test time (never copied into
this tree), read a run's JUnit outcomes, and compare them with a checked-in list of expected
differences, each naming the row of docs/moving-from-redis-py.md that explains it."""

from __future__ import annotations

import re
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
DOC = ROOT / "docs" / "moving-from-redis-py.md"


def fetch_sdist(project: str, release: str, where: Path) -> Path:
    """``project==release``'s sdist from the package index, unpacked under ``where``."""
    fetched = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
         f"{project}=={release}", "-d", str(where)],
        capture_output=True, text=True, timeout=240,
    )  # fmt: skip
    assert fetched.returncode == 0, f"could not fetch {project} {release}'s sdist: {fetched.stderr}"
    (sdist,) = where.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        archive.extractall(where, filter="data")
    (top,) = (path for path in where.iterdir() if path.is_dir())
    return top


def expected(listing: Path) -> dict[tuple[str, str], str]:
    """(mode, test id) -> the docs row that explains the difference."""
    found = {}
    for line in listing.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            mode, test, row = (part.strip() for part in line.split("|"))
            found[mode, test] = row
    return found


def outcomes(report: Path) -> dict[str, bool]:
    """Test id -> passed (a skip counts as passed) from a JUnit XML report."""
    found = {}
    for case in ET.parse(report).iter("testcase"):
        path = case.get("classname", "").split(".")
        test = "/".join(path[:-1]) + ".py::" + path[-1] + "::" + case.get("name", "")
        failed = case.find("failure") is not None or case.find("error") is not None
        found[test] = not failed
    return found


def differences(found: dict[str, bool], listed: dict[str, str]) -> tuple[list[str], list[str]]:
    """(failing tests not listed, listed tests that pass or are gone)."""
    new = sorted(test for test, passed in found.items() if not passed and test not in listed)
    gone = sorted(test for test in listed if found.get(test, True))
    return new, gone


def rows_missing(listing: Path) -> list[str]:
    """The rows ``listing`` names that docs/moving-from-redis-py.md's tables lack."""
    text = DOC.read_text()
    rows = set(expected(listing).values())
    return sorted(row for row in rows if not re.search(r"^\| " + re.escape(row), text, re.M))
