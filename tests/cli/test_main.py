"""The ``redlease`` entry point: unreachable URLs, bad arguments, help, ``python -m``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
import redis

from redlease.cli import main
from tests.cli.helpers import PY, REFUSED_URL, py
from tests.topology import RedisServer

pytestmark = pytest.mark.timeout(60)


# -- errors -------------------------------------------------------------------------------------


@pytest.mark.parametrize("subcommand", [["inspect", "x"], ["demo", "--workers", "1"]])
def test_unreachable_url_exits_69_with_one_line(
    subcommand: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    url = "redis://user:s3cret@127.0.0.1:1/0"
    assert main(["--url", url, *subcommand]) == 69
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "redis://user:***@127.0.0.1:1/0" in err
    assert "s3cret" not in err


def test_unreachable_url_does_not_run_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    touch = py(f"open({str(marker)!r}, 'w').close()")
    assert main(["--url", REFUSED_URL, "run", "x", "--", *touch]) == 69
    assert REFUSED_URL in capsys.readouterr().err
    assert not marker.exists()


@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["run", "x", "--ttl", "-1", "--", "true"], "--ttl"),
        (["run", "x", "--ttl=0", "--", "true"], "--ttl"),
        (["run", "x", "--timeout", "-0.5", "--", "true"], "--timeout"),
        (["run", "x", "--timeout", "1", "-n", "--", "true"], "-n"),
        (["run", "x"], "COMMAND"),
        (["inspect", ""], "NAME"),
        (["inspect", "x", "--", "extra"], "unrecognized"),
        (["--prefix", "a{b}", "inspect", "x"], "--prefix"),
        (["--url", "http://example.com", "inspect", "x"], "--url"),
        (["demo", "--workers", "0"], "--workers"),
        (["demo", "--increments", "many"], "--increments"),
        ([], "required"),
    ],
)
def test_bad_arguments_exit_2_naming_the_argument(
    argv: list[str], named: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "usage:" in err and named in err


def test_help_documents_defaults_and_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    assert "redis://127.0.0.1:6379" in capsys.readouterr().out
    assert main(["run", "--help"]) == 0
    text = capsys.readouterr().out
    for needle in ("REDLEASE_FENCE", "SIGTERM", "75", "70", "127"):
        assert needle in text


def test_python_dash_m_entry_point(server: RedisServer, client: redis.Redis) -> None:
    done = subprocess.run(
        [PY, "-m", "redlease", "inspect", "entry", "--url", server.url, "--json"],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "REDLEASE_URL": ""},
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["name"] == "entry"
