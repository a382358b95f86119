"""The code stays typed, linted, and its generated sync half stays current.

These run the project's own checks, so that the README's one test command covers them.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.timeout(300)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=280)


def test_generated_sync_code_is_current() -> None:
    result = run(sys.executable, "scripts/unasync.py", "--check")
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_is_clean() -> None:
    paths = ("src", "tests", "scripts", "benchmarks", "examples")
    result = run(sys.executable, "-m", "ruff", "check", *paths)
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_is_clean() -> None:
    result = run(sys.executable, "-m", "mypy", "--strict", "src/redlease")
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_public_name_has_a_docstring() -> None:
    import redlease
    import redlease.asyncio

    for module in (redlease, redlease.asyncio):
        for name in module.__all__:
            obj = getattr(module, name)
            if callable(obj):
                assert obj.__doc__, f"{module.__name__}.{name} has no docstring"
