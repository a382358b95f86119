"""A run's bookkeeping: progress lines, the environment it ran in, SIGTERM as Ctrl-C, and the
measuring itself wrapped so that children are reaped and servers stopped whatever happens."""

from __future__ import annotations

import functools
import os
import platform
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from harness.report import error_text
from harness.spawn import reap_all


def interrupt_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt: the clean-up runs (children reaped, servers stopped)."""

    def on_term(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def client_environment() -> dict[str, Any]:
    """The client side of the run: redis-py, its parser, Python, the CPUs."""
    import redis

    return {
        "redis_py": redis.__version__,
        "hiredis": bool(getattr(redis.utils, "HIREDIS_AVAILABLE", False)),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
    }


class Progress:
    """Progress lines on stderr, timed from the start of the run."""

    def __init__(self) -> None:
        self.t_begin = time.monotonic()

    def elapsed(self) -> float:
        return time.monotonic() - self.t_begin

    def __call__(self, text: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {text}", file=sys.stderr, flush=True)

    def guarded(self, section: dict[str, Any], key: str, fn: Callable[[], dict[str, Any]]) -> None:
        """``section[key] = fn()``, or an ``{"error": ...}`` row if it raises."""
        self(key)
        try:
            section[key] = fn()
        except Exception as exc:
            section[key] = {"error": error_text(exc)}

    def uncontended(self, data: dict[str, Any], bench: Callable[[], Any], error_key: str) -> None:
        """Section 1 as a whole: its rows, or one error row under ``error_key`` if it fails."""
        self("uncontended")
        try:
            data["uncontended"] = bench()
        except Exception as exc:
            data["uncontended"] = {error_key: {"error": error_text(exc)}}

    def per_size(
        self,
        section: dict[str, Any],
        sizes: tuple[int, ...],
        libs: list[str],
        bench: Callable[[str, int], dict[str, Any]],
    ) -> None:
        """``section[f"{lib}/{n}"] = bench(lib, n)`` for every size, every library (guarded)."""
        for n in sizes:
            for lib in libs:
                self.guarded(section, f"{lib}/{n}", functools.partial(bench, lib, n))

    def per_library(
        self, section: dict[str, Any], libs: list[str], bench: Callable[[str], dict[str, Any]]
    ) -> None:
        """``section[lib] = bench(lib)`` for every library (guarded)."""
        for lib in libs:
            self.guarded(section, lib, functools.partial(bench, lib))

    def measure(
        self, data: dict[str, Any], body: Callable[[], None], cleanup: Callable[[], None]
    ) -> bool:
        """Run ``body``; False (and a message) if interrupted. Whatever happens, reap every
        child, run ``cleanup`` (stop the servers), and note the load and time at the end."""
        try:
            body()
        except KeyboardInterrupt:
            print("interrupted", file=sys.stderr)
            return False
        finally:
            reap_all()
            cleanup()
            data["env"]["load_after"] = load_average()
            data["env"]["elapsed_s"] = self.elapsed()
        self("done")
        return True


def load_1min() -> str:
    """The 1-minute load average, or '?'."""
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"
