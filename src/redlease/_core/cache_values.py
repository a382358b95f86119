"""What ``redlease.cached`` makes of arguments (a key) and of results (stored values).

Keys: the bound arguments of a call in a canonical, typed text (:func:`key_text`). Values of
different types never share it (``{1: "a"}`` and ``{"1": "a"}``, ``(1, 2)`` and ``[1, 2]``,
``1`` and ``1.0`` and ``True``), and dict and set order does not matter.

Values: :data:`JSON`, the default serializer: JSON that gives back what was stored, tuples as
tuples. What JSON would change silently (a dict with non-str keys, a subclass of a JSON type
such as an enum member or a namedtuple) is a ``TypeError`` naming where it is, not a value
that comes back different; so are the types JSON refuses (sets, bytes, datetimes).
"""

from __future__ import annotations

import json
from typing import Any

__all__ = ["JSON", "JSONValues", "key_text"]

_KEY_ENCODER = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def key_text(arguments: dict[str, Any]) -> str:
    """The bound arguments of a call as canonical text: equal for equal values of the same
    types, different otherwise. Supported: None, bool, int, float, str, bytes, and lists,
    tuples, sets and dicts of them; anything else is a ``TypeError`` naming the argument."""
    return _KEY_ENCODER.encode({n: _key_form(v, f"argument {n!r}") for n, v in arguments.items()})


def _key_form(value: Any, where: str) -> Any:
    # Scalars are JSON's own (which keeps 1, 1.0 and true apart); every container is a list
    # led by its type's tag, so that no two types share a form.
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (bytes, bytearray)):
        return ["b", bytes(value).hex()]
    if isinstance(value, (list, tuple)):
        tag = "t" if isinstance(value, tuple) else "l"
        return [tag, *(_key_form(item, f"{where}[{i}]") for i, item in enumerate(value))]
    if isinstance(value, (set, frozenset)):
        items = (_key_form(item, f"an element of {where}") for item in value)
        return ["s", *sorted(items, key=_KEY_ENCODER.encode)]
    if isinstance(value, dict):
        pairs = (
            [_key_form(k, f"a key of {where}"), _key_form(v, f"{where}[{k!r}]")]
            for k, v in value.items()
        )
        return ["d", *sorted(pairs, key=lambda pair: _KEY_ENCODER.encode(pair[0]))]
    raise TypeError(f"{where} is of type {type(value).__name__}")


_TUPLE, _DICT = "__tuple__", "__dict__"
"""Tags of the stored JSON: ``{"__tuple__": [...]}`` is a tuple; ``{"__dict__": {...}}`` is a
dict whose only key happens to be one of these tags (escaped)."""
_TAGS = (b'"' + _TUPLE.encode() + b'"', b'"' + _DICT.encode() + b'"')
_SCALARS = (type(None), bool, int, float, str)


class JSONValues:
    """JSON that keeps tuples, and refuses what it could not give back as it was."""

    def __repr__(self) -> str:
        return "redlease.cached's JSON"

    def dumps(self, value: Any, /) -> bytes:
        """``value`` as JSON text (UTF-8); ``TypeError`` naming where JSON would not keep it."""
        return json.dumps(_tagged(value, "the result"), ensure_ascii=False).encode()

    def loads(self, data: bytes, /) -> Any:
        """The value :meth:`dumps` wrote."""
        value = json.loads(data)
        if not any(tag in data for tag in _TAGS):
            return value  # no tuple in it: JSON's own value (the common case, no walk)
        return _untagged(value)


JSON = JSONValues()
"""The default serializer of ``redlease.cached``."""


def _tagged(value: Any, where: str) -> Any:
    kind = type(value)
    if kind in _SCALARS:
        return value
    if kind is list or kind is tuple:
        items = [_tagged(item, f"{where}[{i}]") for i, item in enumerate(value)]
        return {_TUPLE: items} if kind is tuple else items
    if kind is dict:
        for key in value:
            if type(key) is not str:
                raise TypeError(
                    f"{where} has the key {key!r} of type {type(key).__name__}: JSON would "
                    "give it back as a str"
                )
        mapping = {key: _tagged(item, f"{where}[{key!r}]") for key, item in value.items()}
        escape = len(mapping) == 1 and next(iter(mapping)) in (_TUPLE, _DICT)
        return {_DICT: mapping} if escape else mapping
    would = "refuse it" if not isinstance(value, (*_SCALARS, list, tuple, dict)) else "change it"
    raise TypeError(f"{where} is of type {kind.__name__}: JSON would {would}")


def _untagged(value: Any) -> Any:
    if isinstance(value, list):
        return [_untagged(item) for item in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        ((key, inner),) = value.items()
        if key == _TUPLE:
            return tuple(_untagged(item) for item in inner)
        if key == _DICT:  # an escaped dict: its keys are its own, not tags
            return {k: _untagged(v) for k, v in inner.items()}
    return {k: _untagged(v) for k, v in value.items()}
