"""What ``import redlease`` loads: no asyncio code of its own, no client library it does not need.

redis-py itself imports ``redis.asyncio`` from ``redis/__init__.py`` (every version since 4.2),
so the check is on what redlease adds on top of ``import redis``: the sync API must not pull in
``redlease._async``, more of ``redis.asyncio``, or valkey-py.
"""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = """
import json, sys
import redis
before = set(sys.modules)
import {module}
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def loaded_by(module: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE.format(module=module)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return list(json.loads(out))


def test_import_redlease_adds_no_asyncio_shell_and_no_valkey() -> None:
    added = loaded_by("redlease")
    assert "redlease._sync.lock" in added  # the probe sees what it should
    unwanted = [m for m in added if m.startswith(("redlease._async", "redis.asyncio", "valkey"))]
    assert unwanted == []


def test_valkey_is_loaded_only_for_a_valkey_client() -> None:
    added = loaded_by("redlease.asyncio")
    assert "redlease._async.lock" in added
    assert [m for m in added if m.startswith("valkey")] == []


HELP_PROBE = """
import contextlib, io, json, sys
from redlease.cli import main
with contextlib.redirect_stdout(io.StringIO()) as out:
    codes = [main(["--help"]), main(["top", "--help"])]
print(json.dumps([codes, "--interval" in out.getvalue(), sorted(sys.modules)]))
"""


def test_redlease_and_its_help_do_not_load_rich() -> None:
    """rich is the optional extra of ``redlease top``: only running ``top`` imports it."""
    assert not [m for m in loaded_by("redlease") if m.split(".")[0] == "rich"]
    out = subprocess.run(
        [sys.executable, "-c", HELP_PROBE], capture_output=True, text=True, timeout=60, check=True
    ).stdout
    codes, described, modules = json.loads(out)
    assert codes == [0, 0] and described  # the probe saw top's help
    assert [m for m in modules if m.split(".")[0] == "rich"] == []


def test_web_frameworks_are_loaded_only_by_their_modules() -> None:
    """starlette (``redlease.web``) and django (``redlease.django``) are optional extras."""
    frameworks = ("starlette", "fastapi", "django")
    for module in ("redlease", "redlease.asyncio"):
        assert [m for m in loaded_by(module) if m.split(".")[0] in frameworks] == []
    assert "starlette" in loaded_by("redlease.web")


def test_redlease_does_not_load_celery() -> None:
    """Celery is the optional extra of ``redlease.celery``: only importing that loads it."""
    assert not [m for m in loaded_by("redlease") if m.split(".")[0] in ("celery", "kombu")]
    assert "celery" in loaded_by("redlease.celery")


def test_redlease_does_not_load_apscheduler() -> None:
    """APScheduler is the optional extra of ``redlease.apscheduler``: only importing that loads
    it (and the asyncio shell, which its AsyncIOOnceExecutor needs)."""
    for module in ("redlease", "redlease.asyncio"):
        assert not [m for m in loaded_by(module) if m.split(".")[0] == "apscheduler"]
    assert "apscheduler" in loaded_by("redlease.apscheduler")
