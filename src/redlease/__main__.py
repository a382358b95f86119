"""``python -m redlease``: the ``redlease`` command line (see :mod:`redlease.cli`)."""

from __future__ import annotations

import sys

from .cli import main

if __name__ == "__main__":  # not when multiprocessing's spawn re-imports it as __mp_main__
    sys.exit(main())
