"""Every Lua script is pinned: its SHA1 is written below, and is what ``SCRIPT LOAD`` returns.

An edit of a script (or of a library it is prefixed with) changes its SHA1, so it shows in
review as a change of ``PINNED`` and fails here until the literal is updated on purpose. The
scripts are collected from every module of ``redlease._core``, so a new module's scripts must
be pinned too; and every ``lua/*.lua`` file (but the ``*_lib.lua`` preludes) must be loaded
by one of them and document its contract in its header.
"""

from __future__ import annotations

import importlib
import pkgutil
import re
from importlib import resources

import pytest
import redis

import redlease._core
from redlease._core.scripts import Script, load


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
PINNED = {
    "acquire_barging": "e9e3219affd1c2b3da5fbae16569404145ec435a",
    "acquire_fair": "e242da713df2abaf686987b7758658f381ba9fdf",
    "acquire_reserving": "e5b83b1cc92a4c022401dfb1bea2fad889a753bb",
    "cache_arm": "401d7fafa88742237b9f52d5effd52dd90bb6a84",
    "cache_invalidate": "5adbebff6c3d181acf561e24449551248d0a1769",
    "cache_read": "1f0f0732826380c6b9cff158a4abf3d2ac158b26",
    "cache_write": "ecf70025f47d8568aed53821af4ef6f0205072d4",
    "claim": "fdd9a8b44d80c79e374707f894c67d58670614e5",
    "election_watch": "4a2f0be8c288871091a351a82c3cf1a541164810",
    "extend": "dbe2b8da203a13ef7a56cc3d32d11fb1f221f7ad",
    "fence": "5cdf0e9c5e711464050a9a903e0ebbb8736597b7",
    "fenced_read": "2bd07fd07f94bdc0d8f3a9db67be05389f807688",
    "fenced_write": "551b8812bf1a7f039a3dc1974a85c6485c1c877f",
    "force_release": "2c27adb27ff9f38469ec8b0649ab158eccc2e0b3",
    "inspect": "a92687ee5c8ee2f121bef6d6e6fa519dada68e66",
    "inventory_cancel": "e5414f9c8be114d9828afa43e0af38b2c756524a",
    "inventory_confirm": "2ccce8dfb1d7507e2b22b561cd38582a9580a050",
    "inventory_order": "a7275086ca5aa180a9f5f9e7c7039381390483b1",
    "inventory_reserve": "037b8ac45226bbbc4da71d690ab6be23b0003ec9",
    "inventory_restock": "a512826b0bc8bb41cc4ed984a2be553344e35a68",
    "inventory_snapshot": "46926721e7cdd01a791b67705dc6e2af4fd39769",
    "inventory_withdraw": "9e47277e6ca1d47f46517cc32ab33d7d1333cd6c",
    "latch_count_down": "90875c797373ef4d6351579b393b7648f519cfd3",
    "latch_inspect": "334ca9ba1441233d3a2c61a4ad53d663516a641a",
    "latch_leave": "d706b013e5900ba0ae6d29166ffab801b61b8de6",
    "latch_set": "d0bf5d735c9546c5f72cd9f7cf71026e25dcd58e",
    "latch_wait": "9519ebefe346204a4ce2ade7f1cccc8c475af9f8",
    "leave": "ee5ea0223a7e4f0dbb7a80b6b3f3b7c3eeedcf95",
    "once_fail": "98025eb26ab7bd115325ed1717d198e81530deb7",
    "once_finish": "994cff50d3367d38a6ed13828c056f7041d713bf",
    "once_force_release": "68971a14c2dbf5e401b189237cefb096758c39a3",
    "once_inspect": "a34966b448e26dd64a2051ca837f85b9be5a4b28",
    "once_renew": "91823824418ddde28640a18b43de3dfe4ef9e0c9",
    "once_start": "305241cb9e2b5facf00a9a5e87c05f5d1911e269",
    "ratelimit_fixed": "79662bd8e5eafa6bf336d0aef8b8f6c3da88c15c",
    "ratelimit_gcra": "ff479ed2e9daababb3f9953001cd7538becc4b29",
    "ratelimit_reset": "164f24e76edacaca046ab60b6edda712be68b93e",
    "ratelimit_sliding": "e2235814dc42a0fdc3ebcb07847dab94ece1ed8d",
    "ratelimit_token_bucket": "2e5404442ba8047e668d8f60100eac5053b3492e",
    "release": "ddd38a8f950a5a26b2cc4cff113f184345988a7f",
    "renew": "da429cca1a62b1a8dfd3a19af61b597c7dbe7857",
    "semaphore_set_permits": "979f98f052bdf04e6738c5f0d82ee617b8ba67f5",
    "shared_acquire": "e5aa81c40921c5cf099618f8bc4bc76ae3665eec",
    "shared_force_release": "2d167e03dee66db366df2acf25f7c7beaed9347f",
    "shared_inspect": "19e1c00eceb17df9070d2b830ca9e63431ef189c",
    "shared_leave": "50ddc40af63957ccd3bc19f9f7d621d43b6b233c",
    "shared_release": "54a54a63920c917ded14213201c940934ce903d4",
    "shared_renew": "8ce9ee7f1ba7e66231f00d5f007b65c0f90e4c86",
}
"""Script name -> SHA1 of its source, as loaded. Update a literal only with the script edit."""
LUA = resources.files("redlease").joinpath("lua")
FILES = sorted(p.name[: -len(".lua")] for p in LUA.iterdir() if p.name.endswith(".lua"))


def test_the_lock_and_new_primitives_scripts_are_all_collected() -> None:
    for name in ("acquire_fair", "release", "renew", "inventory_reserve", "ratelimit_gcra"):
        assert name in SCRIPTS


def test_every_script_is_pinned_and_every_pin_is_a_script() -> None:
    assert sorted(SCRIPTS) == sorted(PINNED)


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_pinned_sha_is_what_the_server_computes(client: redis.Redis, name: str) -> None:
    script = SCRIPTS[name]
    assert script.sha == PINNED[name], f"lua/{name}.lua changed: update PINNED on purpose"
    assert client.script_load(script.source) == PINNED[name]
    assert client.script_exists(PINNED[name]) == [True]


@pytest.mark.parametrize("name", [f for f in FILES if not f.endswith("_lib")])
def test_every_script_file_is_loaded_and_documents_its_contract(name: str) -> None:
    assert name in SCRIPTS, f"lua/{name}.lua is not loaded by any module of redlease._core"
    header = LUA.joinpath(f"{name}.lua").read_text().split("\n")
    assert header[0].startswith(f"-- {name}.lua: ")
    comments = "\n".join(line for line in header if line.startswith("--"))
    assert "Returns" in comments
    assert "KEYS[" in comments


@pytest.mark.parametrize("name", [f for f in FILES if f.endswith("_lib")])
def test_every_lib_says_what_it_provides_and_who_loads_it(name: str) -> None:
    header = LUA.joinpath(f"{name}.lua").read_text().split("\n")
    assert header[0].startswith(f"-- {name}.lua: ")
    comments = "\n".join(line for line in header if line.startswith("--"))
    assert "Provides:" in comments
    assert "Loaded by:" in comments
    source = LUA.joinpath(f"{name}.lua").read_text()
    assert any(source in script.source for script in SCRIPTS.values()), f"{name} is not loaded"


def _defined_twice(source: str) -> set[str]:
    names = re.findall(r"^local function (\w+)", source, flags=re.MULTILINE)
    return {n for n in names if names.count(n) > 1}


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_no_script_defines_a_function_twice(name: str) -> None:
    # A second definition silently shadows the first for the rest of the script.
    assert _defined_twice(SCRIPTS[name].source) == set()


def test_the_shadowing_check_catches_a_function_defined_twice() -> None:
    # As lock_lib's grant and shared_lib's did when both were loaded.
    shadowed = SCRIPTS["shared_acquire"].source + "\nlocal function grant_units(S)\nend\n"
    assert _defined_twice(shadowed) == {"grant_units"}


def test_a_prelude_without_common_lib_first_is_refused() -> None:
    # lock_lib alone would fail on the server, at the first call of now_us or tell.
    with pytest.raises(ValueError, match="prelude"):
        load("claim", prelude=("lock_lib",))
    assert load("claim", prelude=("common_lib", "lock_lib")) == SCRIPTS["claim"]
