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
PINNED = {
    "acquire": "ed1a148308fb3da848a329d30d6f60e26b3ee778",
    "cache_arm": "401d7fafa88742237b9f52d5effd52dd90bb6a84",
    "cache_invalidate": "5adbebff6c3d181acf561e24449551248d0a1769",
    "cache_read": "1f0f0732826380c6b9cff158a4abf3d2ac158b26",
    "cache_write": "ecf70025f47d8568aed53821af4ef6f0205072d4",
    "claim": "5473c7cf5a1b072ad793fb958be41a581c4c6c80",
    "election_watch": "1aa7064ab4264bc7a00842a13658a2a9633dca04",
    "extend": "dbe2b8da203a13ef7a56cc3d32d11fb1f221f7ad",
    "fence": "5cdf0e9c5e711464050a9a903e0ebbb8736597b7",
    "fenced_read": "2bd07fd07f94bdc0d8f3a9db67be05389f807688",
    "fenced_write": "551b8812bf1a7f039a3dc1974a85c6485c1c877f",
    "force_release": "24810d5f84d5682de35d4d89724fea7b826b6b68",
    "inspect": "a92687ee5c8ee2f121bef6d6e6fa519dada68e66",
    "inventory_cancel": "6ad0327bca0a9438956b1be147bb712940b285d4",
    "inventory_confirm": "56e0050769360b8b432a77c9f47a76aa0f78b4e0",
    "inventory_order": "59ed956da3fa556a35bba04cc0bf389d116d9574",
    "inventory_reserve": "f22954b33d9c2b01c7e7ce2eaf491c2b04098a96",
    "inventory_restock": "d01f5c244b4f869b0f6ffb867172faa2ea12a2db",
    "inventory_snapshot": "dcf9eab370ad3145e0d3b722795a79f81d002bbc",
    "inventory_withdraw": "998ee215b7881946239f32b6b0f9ac3b13cee0dc",
    "latch_count_down": "e837d50e1c4a07a12dff1962cf7c75d5a7fc2da9",
    "latch_inspect": "334ca9ba1441233d3a2c61a4ad53d663516a641a",
    "latch_leave": "d706b013e5900ba0ae6d29166ffab801b61b8de6",
    "latch_set": "d0bf5d735c9546c5f72cd9f7cf71026e25dcd58e",
    "latch_wait": "f3eeed22306c00961f4f0a40284bd555c3762957",
    "leave": "8cd4ade0866818bfda20e9b14a59e8405260cf7c",
    "once_fail": "df3590af3b3673115d7a67f13edd94901b70429a",
    "once_finish": "3347e9a767edd65be2de04b535ad09dc10d52e05",
    "once_inspect": "e3ae8f73bff3594bc593c25e063fd83d3f58ee91",
    "once_renew": "49d500befb0401309711a9bf7b0daa1622fe0888",
    "once_start": "1be50bc166c4ff32e83f9d3f9ef996a6df0ab132",
    "ratelimit_fixed": "880c733c9d62b3ece42bf8883702d04436050bf6",
    "ratelimit_gcra": "36fcf32429459d21bb7079166b7f0733990b33fe",
    "ratelimit_reset": "164f24e76edacaca046ab60b6edda712be68b93e",
    "ratelimit_sliding": "83ce79b35ff1dbb762888b18f4f902caf2075fd5",
    "ratelimit_token_bucket": "1441461906eeebf5921f16942977023774124e44",
    "release": "e87c1d4a8310f9a4b3bdfd2e06555f061de7ca66",
    "renew": "da429cca1a62b1a8dfd3a19af61b597c7dbe7857",
    "semaphore_set_permits": "1dd4d3e3c152198ea6447534af578f644774863f",
    "shared_acquire": "03fe1756a427af2e900590645d684b97ba091578",
    "shared_force_release": "2a0e6ce9d43300a84b44dd77a367a062f9c28090",
    "shared_inspect": "dbd1051eaf35f4319bf435acf8d5194fe149434c",
    "shared_leave": "28aa7288f4761e3d81d3d9c56b3a338facd320a4",
    "shared_release": "30072899af40da0ea8eb82383ca89269cd4c3291",
    "shared_renew": "4af62a7259df7e02677f34e48bf55bbb77cf9323",
}
"""Script name -> SHA1 of its source, as loaded. Update a literal only with the script edit."""
LUA = resources.files("redlease").joinpath("lua")
FILES = sorted(p.name[: -len(".lua")] for p in LUA.iterdir() if p.name.endswith(".lua"))


def test_the_lock_and_new_primitives_scripts_are_all_collected() -> None:
    for name in ("acquire", "release", "renew", "inventory_reserve", "ratelimit_gcra"):
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
