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
    "acquire": "e1d72e81844564390994a53685f0ecaed6bb4ae4",
    "claim": "0c888ddb066b906c7a0862c06acca106efa62ac0",
    "election_watch": "4eef219573252ffc3e1469caf5a9b7084e021e13",
    "extend": "dbe2b8da203a13ef7a56cc3d32d11fb1f221f7ad",
    "fence": "5cdf0e9c5e711464050a9a903e0ebbb8736597b7",
    "fenced_read": "2bd07fd07f94bdc0d8f3a9db67be05389f807688",
    "fenced_write": "551b8812bf1a7f039a3dc1974a85c6485c1c877f",
    "inspect": "23cf64285edd41af75afc4ff64408942174c566a",
    "inventory_cancel": "6ad0327bca0a9438956b1be147bb712940b285d4",
    "inventory_confirm": "56e0050769360b8b432a77c9f47a76aa0f78b4e0",
    "inventory_order": "59ed956da3fa556a35bba04cc0bf389d116d9574",
    "inventory_reserve": "f22954b33d9c2b01c7e7ce2eaf491c2b04098a96",
    "inventory_restock": "6a3e3ea8cb40af155f894dc1d61179fbe8fdb940",
    "inventory_snapshot": "dcf9eab370ad3145e0d3b722795a79f81d002bbc",
    "inventory_withdraw": "998ee215b7881946239f32b6b0f9ac3b13cee0dc",
    "latch_count_down": "5d5d65ad82eb3e3f177cf6d046de952f85904243",
    "latch_inspect": "334ca9ba1441233d3a2c61a4ad53d663516a641a",
    "latch_leave": "d706b013e5900ba0ae6d29166ffab801b61b8de6",
    "latch_set": "d0bf5d735c9546c5f72cd9f7cf71026e25dcd58e",
    "latch_wait": "f15cbbabf291b95fd8aab7fc817c76de78990354",
    "leave": "fbd03ecc55e0eb6862a2e00ad7a1a5e627d79f76",
    "ratelimit_fixed": "880c733c9d62b3ece42bf8883702d04436050bf6",
    "ratelimit_sliding": "83ce79b35ff1dbb762888b18f4f902caf2075fd5",
    "ratelimit_gcra": "36fcf32429459d21bb7079166b7f0733990b33fe",
    "ratelimit_token_bucket": "1441461906eeebf5921f16942977023774124e44",
    "ratelimit_reset": "164f24e76edacaca046ab60b6edda712be68b93e",
    "once_fail": "84660f2843962516a706dda6e017301eb12792f0",
    "once_finish": "c457b26a53ee5868f064f090d8066b72544bfe10",
    "once_inspect": "ba63eec3c1cf06a1fe506699ba6c0896223cffb0",
    "once_renew": "b1c885ef5d98011eba65617c15809507e0bb7bcc",
    "once_start": "34a322a66260eba7ead835a8de9853878272b1dc",
    "release": "f9105a644b2d24ec8989487d6557b50dae89ec6b",
    "renew": "da429cca1a62b1a8dfd3a19af61b597c7dbe7857",
    "semaphore_set_permits": "fc7fae21b44403587f3ea4a23729b9a51ae19bb2",
    "shared_acquire": "59ca3f9d8939233ac13612b9fe65244df070b23d",
    "shared_inspect": "20daae1489e09bf01859600ad93e2b0f8f170c3d",
    "shared_leave": "955f8d34ab3fb5eb3b47934da921ba551106669a",
    "shared_release": "03875d95ce40f6192ffbcab9090bcdc31d511db7",
    "shared_renew": "69c89e90ade957c5bc50fc1480442c215fdf6c9f",
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
