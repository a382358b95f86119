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
    "acquire_barging": "b587360379f35c2da3ddcd9af3e209d9cdbd4ed7",
    "acquire_fair": "1ad31fb53e3d322de1a9e1d175bb6418bca9ba58",
    "acquire_reserving": "5a4e2ca0a3a3b2b4a52f25aa7208625add12f4a2",
    "adopt": "4cff4f3635d844252f335c35dd9641c7923cf005",
    "cache_arm": "aa01fb70998bf7783623434d43a6106f533f57b8",
    "cache_invalidate": "5adbebff6c3d181acf561e24449551248d0a1769",
    "cache_read": "1f0f0732826380c6b9cff158a4abf3d2ac158b26",
    "cache_write": "82bcf8e6618a994de879d8b1ce08b4cbaf358ecd",
    "claim": "2d5c9426059b3817eace50064a8a467716501402",
    "election_watch": "1bfb6e702876dca2eb09a2efc547268ff8739447",
    "extend": "dbe2b8da203a13ef7a56cc3d32d11fb1f221f7ad",
    "fence": "5cdf0e9c5e711464050a9a903e0ebbb8736597b7",
    "fenced_read": "2bd07fd07f94bdc0d8f3a9db67be05389f807688",
    "fenced_write": "551b8812bf1a7f039a3dc1974a85c6485c1c877f",
    "force_release": "03d084a446c46d9d1b4ec01e0f604463204ca548",
    "inspect": "a92687ee5c8ee2f121bef6d6e6fa519dada68e66",
    "inventory_cancel": "4fc5908a74c21c8d2b52a2245a2a1153dfb76939",
    "inventory_confirm": "3d556ae4b97fac6b1b43a92b48bcf354d3673909",
    "inventory_order": "6696a0cace7c677d4ee5ee872975f7a9d7957825",
    "inventory_reserve": "05da18e2ca8144e894c5ba12de1e90cca006da75",
    "inventory_restock": "1a4dad33a295268b9d350d1f35c2df0906dde440",
    "inventory_snapshot": "15066c3297b2216c9178c883b8e048ae197895d7",
    "inventory_withdraw": "7b60fcd69eb80700092322e99cbbeebb9e809689",
    "latch_count_down": "dbbf475a603f8c056c6bc2eb21d2ab396f92acb4",
    "latch_inspect": "334ca9ba1441233d3a2c61a4ad53d663516a641a",
    "latch_leave": "d706b013e5900ba0ae6d29166ffab801b61b8de6",
    "latch_set": "d0bf5d735c9546c5f72cd9f7cf71026e25dcd58e",
    "latch_wait": "701a9333a080b3e7beef836829c60fe83c55c119",
    "leave": "f33bc228451474833d46bb67c4259b059eb43dcd",
    "once_fail": "0279554cdd2c742bf1d0b90450bacf42b835ecff",
    "once_finish": "0e96c5de5e0ef742a87a283f647b03c68dc9dc65",
    "once_force_release": "2a59404fd6ea13ceb510fd3f0617c0ceca75aef2",
    "once_inspect": "446216710380914a88f4da75e52c84b93d10db55",
    "once_renew": "415a0544a6c2d86d5c48bb86f448e45aca922ff8",
    "once_start": "040754167de18ff9d961671cb0e3feba4a114188",
    "ratelimit_fixed": "c55c75103eab83083ff49036264d1c69d9892091",
    "ratelimit_gcra": "877a5bf92d71aada8f6e829511a14e22722de32a",
    "ratelimit_reserve_gcra": "2bffcda43629757fb0cb78f7cb5d009705fbfd3f",
    "ratelimit_reserve_token_bucket": "1d29336507082e7280064241517674053b5c54f2",
    "ratelimit_reset": "164f24e76edacaca046ab60b6edda712be68b93e",
    "ratelimit_sliding": "065f5b1cd55fc944b61cc212407fceb0eca3c6a9",
    "ratelimit_token_bucket": "e3a6fc00b4e03490bd10b8bc17ada14aaddc0201",
    "ratelimit_unreserve": "3e17ae2038fdac0a56b95b105977e99f243693f5",
    "redispy_acquire": "e6d051a72693ce807bf951bcc16a9c1eb09e3a71",
    "redispy_inspect": "99be178f976df550a705ddfd9551bf2e4f5eebf3",
    "redispy_release": "0b0c36f53474e44e4ae0e878d1bb434554566f1d",
    "release": "48bbb8c1cc859e519ae02f4c8a939df0f53641a6",
    "renew": "da429cca1a62b1a8dfd3a19af61b597c7dbe7857",
    "semaphore_set_permits": "6102f5b67e84c23d1bc057263bfdfa41c1c9a0a9",
    "shared_acquire": "07fef5259cddee4f4f546ca8f1f1b7629f74ab49",
    "shared_force_release": "42cc66b7dc0579660784be80df52e21a9bba69ef",
    "shared_inspect": "f86bb311ef2feb20d94028397f096381ac607149",
    "shared_leave": "cd038909650959807e14978ddfc049595efdb5cd",
    "shared_release": "069e0bc6bfcc657ad49705fff6bd0f901b7950f0",
    "shared_renew": "dbbb186e2d29ed0113470ca248f37849489cb632",
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
