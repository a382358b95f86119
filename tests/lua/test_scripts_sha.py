"""Every Lua script against a real server: its pinned SHA1 is what ``SCRIPT LOAD`` returns.

The scripts are collected from every module of ``redlease._core``, so a new module's scripts
are pinned too; and every ``lua/*.lua`` file (but the ``*_lib.lua`` preludes) must be loaded
by one of them and document its contract in its header.
"""

from __future__ import annotations

import importlib
import pkgutil
from importlib import resources

import pytest
import redis

import redlease._core
from redlease._core.scripts import Script


def all_scripts() -> dict[str, Script]:
    """Every module-level Script of redlease._core, by script name."""
    found: dict[str, Script] = {}
    for info in pkgutil.iter_modules(redlease._core.__path__):
        module = importlib.import_module(f"redlease._core.{info.name}")
        for value in vars(module).values():
            if isinstance(value, Script):
                found[value.name] = value
    return found


SCRIPTS = all_scripts()
LUA = resources.files("redlease").joinpath("lua")
FILES = sorted(p.name[: -len(".lua")] for p in LUA.iterdir() if p.name.endswith(".lua"))


def test_the_lock_and_new_primitives_scripts_are_all_collected() -> None:
    for name in ("acquire", "release", "renew", "inventory_reserve", "ratelimit_gcra"):
        assert name in SCRIPTS


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_pinned_sha_is_what_the_server_computes(client: redis.Redis, name: str) -> None:
    script = SCRIPTS[name]
    assert client.script_load(script.source) == script.sha
    assert client.script_exists(script.sha) == [True]


@pytest.mark.parametrize("name", [f for f in FILES if not f.endswith("_lib")])
def test_every_script_file_is_loaded_and_documents_its_contract(name: str) -> None:
    assert name in SCRIPTS, f"lua/{name}.lua is not loaded by any module of redlease._core"
    header = LUA.joinpath(f"{name}.lua").read_text().split("\n")
    assert header[0].startswith(f"-- {name}.lua: ")
    comments = "\n".join(line for line in header if line.startswith("--"))
    assert "Returns" in comments
    assert "KEYS[" in comments
