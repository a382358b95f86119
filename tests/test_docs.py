"""The API reference builds from the docstrings, with every warning an error.

``docs/conf.py`` is Sphinx's configuration; the tools come with the ``docs`` extra, which the
``test`` extra includes. Nitpicky mode (``-n``) makes every cross-reference of redlease's own
resolve, so a renamed class or a typo in a docstring fails here.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
pytestmark = pytest.mark.timeout(180)

PAGES = [
    "index.html",
    "reference/redlease.html",
    "reference/asyncio.html",
    "reference/errors.html",
    "reference/operating.html",
    "reference/cli.html",
    "reference/algorithms.html",
    "design.html",
    "safety.html",
    "compatibility.html",
    "benchmarks.html",
    "changelog.html",
]


def sphinx(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    """Build ``source`` into ``out`` in strict mode: warnings are errors, references checked."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",  # every warning is an error
            "--keep-going",  # ... but report them all
            "-n",  # nitpicky: every reference must resolve
            "-q",
            "-b",
            "html",
            "-d",
            str(out / ".doctrees"),
            str(source),
            str(out / "html"),
        ],
        capture_output=True,
        text=True,
        timeout=150,
    )


def test_reference_builds_without_a_warning(tmp_path: Path) -> None:
    result = sphinx(DOCS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    html = tmp_path / "html"
    for page in PAGES:
        assert (html / page).is_file(), f"{page} was not built"

    sync = (html / "reference/redlease.html").read_text()
    for anchor in ("redlease.Lock.acquire", "redlease.Redlock", "redlease.Inventory.reserve"):
        assert f'id="{anchor}"' in sync, anchor
    asyncio = (html / "reference/asyncio.html").read_text()
    assert 'id="redlease.asyncio.Lock.acquire"' in asyncio
    assert "alias of" not in asyncio  # the async classes are documented, not just named
    assert 'id="redlease.close"' in sync
    assert 'id="redlease.asyncio.close"' in asyncio
    operating = (html / "reference/operating.html").read_text()
    for anchor in ("redlease.metrics.use", "redlease.metrics.PrometheusMetrics"):
        assert f'id="{anchor}"' in operating, anchor
    assert "held_at_close" in operating  # the table of log events
    errors = (html / "reference/errors.html").read_text()
    assert 'id="redlease.LockLost"' in errors
    cli = (html / "reference/cli.html").read_text()
    assert "usage: redlease run" in cli
    assert "Redlock" in (html / "safety.html").read_text()


def test_a_broken_reference_fails_the_build(tmp_path: Path) -> None:
    """The twin: the same sources with one reference to a name that does not exist."""
    source = tmp_path / "project"
    shutil.copytree(DOCS, source / "docs", ignore=shutil.ignore_patterns("_build"))
    (source / "benchmarks").mkdir()
    shutil.copy2(ROOT / "benchmarks" / "README.md", source / "benchmarks" / "README.md")
    shutil.copy2(ROOT / "CHANGELOG.md", source / "CHANGELOG.md")
    page = source / "docs" / "reference" / "errors.rst"
    page.write_text(page.read_text() + "\nSee also :class:`redlease.NoSuchError`.\n")

    result = sphinx(source / "docs", tmp_path / "out")
    assert result.returncode != 0
    assert "redlease.NoSuchError" in result.stderr
    assert result.stderr.count("WARNING") == 1, result.stderr  # that one, and nothing else
