"""Sphinx configuration for the redlease API reference.

Build it (strict: every warning is an error, and every cross-reference must resolve):

    sphinx-build -W --keep-going -n -b html docs docs/_build/html

Sphinx rather than MkDocs: the docstrings are written in reStructuredText (``:param:``,
``:class:`` roles, ``::`` literal blocks), which autodoc renders as written and ``-n`` checks;
the prose pages (safety, benchmarks, compatibility, changelog) are Markdown, read by MyST.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util.docutils import SphinxDirective

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # the reference documents this checkout, installed or not

import redlease  # noqa: E402
import redlease.asyncio  # noqa: E402

# redlease.asyncio exports AsyncLock as ``Lock`` (and so on). autodoc documents a class whose
# __name__ differs from the documented name as a bare "alias of AsyncLock", with no docstring or
# members. For this build only, give each exported class its public name; __qualname__ (and so
# the canonical name, redlease._async.lock.AsyncLock, that docstrings may point at) is unchanged.
for _public in redlease.asyncio.__all__:
    _obj = getattr(redlease.asyncio, _public)
    if isinstance(_obj, type) and _obj.__module__.startswith("redlease._async."):
        _obj.__name__ = _public

project = "redlease"
author = "the redlease authors"
copyright = "2026, the redlease authors"
release = redlease.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "myst_parser",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build"]

# MyST: GitHub-style heading anchors, so "page.md#a-heading" links work as on GitHub.
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
autoclass_content = "both"  # the class docstring, then the __init__ one with its :param: list

# Nitpicky mode (-n) must resolve every reference. The ones below point at other projects'
# documentation (redis-py's, Python's), which this offline build has no inventory for (no
# intersphinx): they are the only references allowed to stay unresolved. Everything of
# redlease's own must resolve. A new stdlib type in a signature fails the build until it is
# added here, on purpose.
nitpick_ignore_regex = [
    ("py:class", r"redis\.[\w.]+"),
    # autodoc splits a dataclass field's "dict[bytes, bytes]" at the comma (FencedRecord.fields)
    ("py:class", r"dict\[\w+"),
    # redlease.web and redlease.django take the frameworks' request and response types
    ("py:class", r"(starlette|django)\.[\w.]+"),
]
nitpick_ignore = [
    ("py:class", "collections.abc.Callable"),
    ("py:class", "collections.abc.Sequence"),
    ("py:class", "collections.abc.Iterator"),
    ("py:class", "collections.abc.AsyncIterator"),
    ("py:class", "collections.abc.Mapping"),
    ("py:class", "collections.abc.Awaitable"),
    ("py:class", "collections.abc.MutableMapping"),
    ("py:class", "argparse.ArgumentParser"),
    ("py:class", "datetime.datetime"),  # redlease.apscheduler.Fire.scheduled
    ("py:class", "datetime.timedelta"),  # Once's every and ttl
]

# A command-line reference: keep "--url" as typed (smart quotes would make it an en dash).
smartquotes = False

html_theme = "alabaster"
html_title = f"redlease {release}"
html_static_path: list[str] = []


class CommandHelp(SphinxDirective):
    """``.. command-help:: [SUBCOMMAND]``: what ``redlease [SUBCOMMAND] --help`` prints, verbatim.

    The CLI's help is laid out for a terminal (argparse's raw description formatter), so the
    reference shows it as the terminal does, taken from the command itself at build time.
    """

    optional_arguments = 1

    def run(self) -> list[nodes.Node]:
        from redlease.cli import main

        argv = [*self.arguments, "--help"]
        out = io.StringIO()
        columns = os.environ.get("COLUMNS")
        os.environ["COLUMNS"] = "100"  # argparse wraps to the terminal: make it reproducible
        try:
            with contextlib.redirect_stdout(out):
                code = main(argv)
        finally:
            if columns is None:
                del os.environ["COLUMNS"]
            else:
                os.environ["COLUMNS"] = columns
        if code != 0:
            raise self.error(f"redlease {' '.join(argv)} exited {code}")
        text = out.getvalue().rstrip()
        block = nodes.literal_block(text, text)
        block["language"] = "text"
        return [block]


def setup(app: Any) -> dict[str, bool]:
    """Register the ``command-help`` directive."""
    app.add_directive("command-help", CommandHelp)
    return {"parallel_read_safe": True}
