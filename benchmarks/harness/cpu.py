"""CPU time: of this process, of another process or one of this process' threads (from
``/proc``), and of a server (from ``INFO cpu``)."""

from __future__ import annotations

import contextlib
import os
import threading
from typing import Any


def cpu_s() -> float:
    """CPU seconds (user + system) of this whole process, all threads."""
    t = os.times()
    return t.user + t.system


def _stat_cpu(path: str) -> float:
    """User + system CPU seconds from a ``/proc/.../stat`` file (OSError if unreadable)."""
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def process_cpu(pid: int | None) -> float:
    """Seconds of CPU the process ``pid`` has used (0.0 if unknown)."""
    if pid is None:
        return 0.0
    try:
        return _stat_cpu(f"/proc/{pid}/stat")
    except OSError:
        return 0.0


def thread_cpu(name: str) -> float:
    """CPU seconds of this process' threads called ``name`` (0 if there is none)."""
    ids = {t.native_id for t in threading.enumerate() if t.name == name}
    total = 0.0
    for tid in ids:
        with contextlib.suppress(OSError):
            total += _stat_cpu(f"/proc/self/task/{tid}/stat")
    return total


def server_cpu(probe: Any) -> float:
    """A server's CPU seconds (``used_cpu_user + used_cpu_sys``), read with the client ``probe``."""
    info = probe.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])
