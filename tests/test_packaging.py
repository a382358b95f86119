"""The sdist and the wheel build from the committed files alone and hold what a user needs.

The build runs on a copy of the files git tracks, into which the junk a work tree gathers (a
virtualenv, scratch folders) is planted: none of it may reach the sdist. ``python -m build``
runs without isolation (hatchling comes with the test extra), so the test needs no network.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

import pytest

import redlease

ROOT = Path(__file__).resolve().parent.parent
VERSION = redlease.__version__
pytestmark = pytest.mark.timeout(180)

# What a work tree gathers and a release must never carry: not in git, most not in .gitignore.
JUNK = {
    ".venv/lib/python3.11/site-packages/junk.py": "x = 1\n",
    "venv/pyvenv.cfg": "home = /nowhere\n",
    "venv/lib/site-packages/junk.py": "x = 1\n",
    "scratch/notes.txt": "local notes\n",
    "local_settings.py": "SECRET = 'not for the sdist'\n",
    "src/redlease/__pycache__/junk.cpython-311.pyc": "",
    "tests/__pycache__/junk.cpython-311.pyc": "",
}
JUNK_LINKS = {"venv/bin/python": "/nonexistent/bin/python3"}  # a venv's link, dangling here

# Everything in the sdist is under one of these (or is PKG-INFO, written by the backend).
SDIST_TOP = {
    "src",
    "tests",
    "examples",
    "scripts",
    "benchmarks",
    "docs",
    "README.md",
    "CHANGELOG.md",
    "LICENSE",
    "pyproject.toml",
    ".gitignore",
    "PKG-INFO",
}


def tracked_files() -> list[str]:
    """The files git tracks in this checkout (skip when this is not a git checkout)."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    result = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    if result.returncode != 0:
        pytest.skip(f"not a git checkout: {result.stderr.strip()}")
    # A file deleted but not yet committed is listed and absent: leave it out.
    return sorted(name for name in result.stdout.split("\0") if (ROOT / name).is_file())


def copy_tree(files: list[str], dest: Path) -> None:
    """Copy ``files`` (tracked, relative to ROOT) to ``dest``, then plant the junk."""
    for name in files:
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, target)
    for name, text in JUNK.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    for name, points_to in JUNK_LINKS.items():
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.symlink_to(points_to)


def build(source: Path, outdir: Path, *which: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "build", "--no-isolation", *which, "--outdir", str(outdir)],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=150,
    )


@dataclass
class Dists:
    tracked: list[str]
    sdist: Path
    wheel: Path

    def sdist_names(self) -> set[str]:
        prefix = f"redlease-{VERSION}/"
        with tarfile.open(self.sdist) as tar:
            names = {m.name for m in tar.getmembers() if m.isfile()}
        assert all(name.startswith(prefix) for name in names), sorted(names)
        return {name[len(prefix) :] for name in names}

    def wheel_names(self) -> set[str]:
        with zipfile.ZipFile(self.wheel) as whl:
            return set(whl.namelist())

    def wheel_metadata(self) -> str:
        with zipfile.ZipFile(self.wheel) as whl:
            return whl.read(f"redlease-{VERSION}.dist-info/METADATA").decode()


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> Dists:
    files = tracked_files()
    source = tmp_path_factory.mktemp("checkout")
    copy_tree(files, source)
    out = tmp_path_factory.mktemp("dist")
    result = build(source, out)  # the sdist, then the wheel built from that sdist
    assert result.returncode == 0, result.stdout + result.stderr
    (sdist,) = out.glob("*.tar.gz")
    (wheel,) = out.glob("*.whl")
    return Dists(files, sdist, wheel)


def test_sdist_holds_the_tracked_files_and_nothing_else(dists: Dists) -> None:
    names = dists.sdist_names()
    unexpected = sorted(names - set(dists.tracked) - {"PKG-INFO"})
    assert not unexpected, f"not tracked by git, yet in the sdist: {unexpected}"
    assert {name.split("/")[0] for name in names} <= SDIST_TOP
    for name in ("LICENSE", "README.md", "CHANGELOG.md", "pyproject.toml", "PKG-INFO"):
        assert name in names
    # Everything needed to build the wheel and run the tests from the sdist is there.
    for name in dists.tracked:
        if name.startswith(("src/redlease/", "tests/", "examples/", "scripts/", "docs/")):
            assert name in names, f"tracked {name} is missing from the sdist"


def test_wheel_ships_the_package_the_scripts_license_and_types(dists: Dists) -> None:
    names = dists.wheel_names()
    info = f"redlease-{VERSION}.dist-info/"
    stray = sorted(n for n in names if not n.startswith(("redlease/", info)))
    assert not stray, f"outside the package in the wheel: {stray}"
    assert f"{info}licenses/LICENSE" in names
    assert "redlease/py.typed" in names
    lua = {n for n in dists.tracked if n.startswith("src/redlease/lua/") and n.endswith(".lua")}
    assert len(lua) >= 10
    assert {n.removeprefix("src/") for n in lua} <= names
    package = {n.removeprefix("src/") for n in dists.tracked if n.startswith("src/redlease/")}
    assert package <= names, sorted(package - names)
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


def test_wheel_metadata_license_classifiers_and_urls(dists: Dists) -> None:
    metadata = HeaderParser().parsestr(dists.wheel_metadata())
    assert metadata["License-Expression"] == "MIT"
    assert metadata.get_all("License-File") == ["LICENSE"]
    assert metadata["Requires-Python"] == ">=3.10"
    classifiers = set(metadata.get_all("Classifier") or [])
    for minor in (10, 11, 12, 13):
        assert f"Programming Language :: Python :: 3.{minor}" in classifiers
    assert any(c.startswith("Development Status :: ") for c in classifiers)
    assert "Typing :: Typed" in classifiers
    assert "Operating System :: OS Independent" in classifiers
    assert any(c.startswith("Topic :: ") for c in classifiers)
    # PEP 639: the license expression replaces the license classifiers (PyPI refuses both).
    assert not [c for c in classifiers if c.startswith("License ::")]
    urls = dict(value.split(", ", 1) for value in metadata.get_all("Project-URL") or [])
    assert set(urls) >= {"Documentation", "Changelog", "Source", "Issues"}
    assert all(url.startswith("https://") for url in urls.values())
    assert metadata["Description-Content-Type"] == "text/markdown"


def test_twine_check_passes(dists: Dists) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(dists.sdist), str(dists.wheel)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("PASSED") == 2, result.stdout


def test_without_the_include_list_the_junk_gets_in(tmp_path: Path) -> None:
    """The twin: the same copy with the sdist include list taken out of pyproject.toml."""
    source = tmp_path / "checkout"
    copy_tree(tracked_files(), source)
    pyproject = source / "pyproject.toml"
    text = pyproject.read_text()
    table = re.search(r"^\[tool\.hatch\.build\.targets\.sdist\]\n(?:(?!\[).*\n)*", text, re.M)
    assert table, "pyproject.toml has no [tool.hatch.build.targets.sdist] table"
    pyproject.write_text(text.replace(table.group(0), ""))
    out = tmp_path / "dist"
    result = build(source, out, "--sdist")
    if result.returncode != 0:  # the junk broke the build (as a local venv once did)
        assert "venv" in result.stdout + result.stderr, result.stdout + result.stderr
        return
    (sdist,) = out.glob("*.tar.gz")
    names = Dists(tracked_files(), sdist, sdist).sdist_names()
    assert {"scratch/notes.txt", "local_settings.py"} <= names
