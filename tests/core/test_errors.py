"""The exception hierarchy: one base per outage, bases caught but never raised."""

from __future__ import annotations

import pytest

import redlease
from redlease import errors


@pytest.mark.parametrize(
    "cls",
    [
        redlease.LockUnavailable,
        redlease.QuorumUnavailable,
        redlease.InventoryUnavailable,
        redlease.RateLimitUnavailable,
        redlease.FencedStoreUnavailable,
    ],
)
def test_every_outage_is_one_catchable_unavailable(cls: type[Exception]) -> None:
    assert issubclass(cls, redlease.Unavailable)
    assert issubclass(cls, redlease.RedleaseError)


@pytest.mark.parametrize(
    "base",
    [
        redlease.RedleaseError,
        redlease.Unavailable,
        redlease.LockError,
        redlease.InventoryError,
        redlease.RateLimitError,
        redlease.FencingError,
    ],
)
def test_bases_are_not_raised_bare(base: type[redlease.RedleaseError]) -> None:
    with pytest.raises(TypeError, match="is a base class"):
        base("boom")


def test_concrete_errors_carry_the_name() -> None:
    exc = redlease.LockUnavailable("down", name="orders:42")
    assert exc.name == "orders:42" and str(exc) == "down"


def test_every_public_error_is_exported() -> None:
    for name in errors.__all__:
        assert getattr(redlease, name) is getattr(errors, name)
