"""What redlease.cached makes of arguments (keys) and results (stored values)."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict, namedtuple
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from redlease._core.cache_values import JSON, key_text

# -- keys: different types never share one --------------------------------------------------


def test_values_of_different_types_make_different_keys() -> None:
    """issue 37: {1: "a"} and {"1": "a"} shared a key (JSON turns int keys into str)."""
    alike = [
        {1: "a"},
        {"1": "a"},
        {1.0: "a"},
        {True: "a"},
        {(1,): "a"},
        [1, 2],
        (1, 2),
        {1, 2},
        [[1, 2]],
        ["l", 1, 2],
        1,
        1.0,
        True,
        "1",
        b"1",
        None,
        "None",
    ]
    texts = [key_text({"x": value}) for value in alike]
    assert len(set(texts)) == len(alike)


def test_order_in_dicts_and_sets_does_not_matter() -> None:
    assert key_text({"x": {"a": 1, "b": 2}}) == key_text({"x": {"b": 2, "a": 1}})
    assert key_text({"x": {3, 1, 2}}) == key_text({"x": {2, 3, 1}})
    assert key_text({"a": 1, "b": 2}) == key_text({"b": 2, "a": 1})
    assert key_text({"x": {1: "a", "1": "b"}}) == key_text({"x": {"1": "b", 1: "a"}})


def test_a_type_a_key_cannot_hold_is_named() -> None:
    with pytest.raises(TypeError, match=r"argument 'rows'\[1\] is of type object"):
        key_text({"rows": [1, object()]})
    with pytest.raises(TypeError, match="a key of argument 'd' is of type Shade"):
        key_text({"d": {Shade(): 1}})
    with pytest.raises(TypeError, match="an element of argument 's' is of type Shade"):
        key_text({"s": {Shade()}})


def test_twin_plain_json_gives_int_and_str_dict_keys_one_key() -> None:
    """The check above, on the text the keys were hashed from before: it finds the collision."""
    plain = json.JSONEncoder(sort_keys=True, separators=(",", ":"))
    assert plain.encode([{1: "a"}]) == plain.encode([{"1": "a"}])
    assert plain.encode([(1, 2)]) == plain.encode([[1, 2]])


# -- values: what is stored comes back as it was -----------------------------------------------

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text()
values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=10) | st.sampled_from(["__tuple__", "__dict__"]), inner)
    ),
    max_leaves=20,
)


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same types all the way down."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


@given(values)
def test_a_value_comes_back_as_it_was(value: Any) -> None:
    assert same(JSON.loads(JSON.dumps(value)), value)


def test_tuples_stay_tuples_and_tags_in_the_data_stay_data() -> None:
    for value in [
        (1, 2),
        ("total", [(1, "a"), (2, "b")]),
        {"__tuple__": [1, 2]},
        {"__dict__": {"__tuple__": [1]}},
        [{"__tuple__": (1,)}],
        (),
        {"a": ()},
    ]:
        assert same(JSON.loads(JSON.dumps(value)), value), value
    assert JSON.dumps({"rows": [1, 2]}) == b'{"rows": [1, 2]}'  # plain JSON without tuples
    assert JSON.loads(b'{"rows": [1, 2]}') == {"rows": [1, 2]}


class Color(enum.IntEnum):
    RED = 1


Point = namedtuple("Point", "x y")


class Shade:
    """A type a key cannot hold."""


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({1: "a"}, r"the result has the key 1 of type int: JSON would give it back as a str"),
        ([{"a": {2.5: 1}}], r"the result\[0\]\['a'\] has the key 2.5"),
        ({"c": Color.RED}, r"the result\['c'\] is of type Color: JSON would change it"),
        (Point(1, 2), "of type Point: JSON would change it"),
        (OrderedDict(a=1), "of type OrderedDict: JSON would change it"),
        ({1, 2}, "of type set: JSON would refuse it"),
        ([b"x"], r"the result\[0\] is of type bytes: JSON would refuse it"),
    ],
)
def test_what_json_would_change_or_refuse_is_a_type_error_naming_where(
    value: Any, message: str
) -> None:
    with pytest.raises(TypeError, match=message):
        JSON.dumps(value)


def test_twin_plain_json_changes_tuples_and_int_keys_silently() -> None:
    """The check above, on the stdlib's json (the default before): both come back changed."""
    for value in [(1, 2), {1: "a"}, Point(1, 2)]:
        assert not same(json.loads(json.dumps(value)), value)
