"""One call, however it is spelled: its arguments bound to the function's signature.

``page("home")``, ``page(slug="home")`` and ``page("home", lang="en")`` (``"en"`` the default)
bind to the same arguments, so whatever is keyed by them (a cached value, a queued task) is
keyed once.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["INSTANCE", "bind", "signature"]

INSTANCE = ("self", "cls")
"""Names of a first parameter that is the instance (or class) a method was called on."""


def signature(func: Callable[..., Any]) -> inspect.Signature | None:
    """``func``'s signature, or ``None`` when it has none (some builtins)."""
    try:
        return inspect.signature(func)
    except (TypeError, ValueError):
        return None


def bind(
    sig: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of one call by parameter name, in the signature's order, defaults
    applied (``*args`` a tuple, ``**kwargs`` a dict). A call the signature refuses is the
    ``TypeError`` calling the function would raise. Without a signature: ``{"args": args,
    "kwargs": kwargs}``."""
    if sig is None:
        return {"args": args, "kwargs": kwargs}
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)
