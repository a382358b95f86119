"""The CLI's argument types accept exactly what the library accepts, with its messages.

Each case gives the same value to the argparse type and to ``redlease.Lock`` (nothing is sent
to Redis: a Lock is only described) and expects the same verdict and the same message.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

import pytest
import redis

import redlease
from redlease.cli import _common, run

CLIENT = redis.Redis(host="127.0.0.1", port=1)  # never connected: Lock() sends nothing


def library_verdict(make: Callable[[], Any]) -> str | None:
    """``None`` if the library accepts, else its error message."""
    try:
        make()
    except (TypeError, ValueError) as exc:
        return str(exc)
    return None


def cli_verdict(parse: Callable[[str], Any], text: str) -> str | None:
    try:
        parse(text)
    except argparse.ArgumentTypeError as exc:
        return str(exc)
    return None


@pytest.mark.parametrize(
    "text", ["10", "0.5", "0.0001", "0", "-1", "nan", "inf", "2592000", "2592000.5", "1e9"]
)
def test_ttl_as_the_library(text: str) -> None:
    expected = library_verdict(lambda: redlease.Lock(CLIENT, "x", ttl=float(text)))
    assert cli_verdict(_common.lease_seconds, text) == expected


@pytest.mark.parametrize(
    "text", ["24h", "1h30m", "90", "0.5", "400d", "0", "0s", "-1", "5x", "500d", "nan", ""]
)
def test_every_as_the_library(text: str) -> None:
    # Once(every="24h") was a TypeError while `redlease run --every 24h` ran. The command line
    # names its option: "--every must be ...".
    expected = library_verdict(lambda: redlease.Once(CLIENT, "x", every=text))
    assert cli_verdict(run.period_seconds, text) == (expected and "--" + expected)
    if expected is None:
        assert run.period_seconds(text) == redlease.Once(CLIENT, "x", every=text).every


@pytest.mark.parametrize("text", ["0", "2.5", "-1", "-0.5", "-2", "inf", "-inf", "nan"])
def test_timeout_as_the_library(text: str) -> None:
    expected = library_verdict(lambda: redlease.Lock(CLIENT, "x", timeout=float(text)))
    assert cli_verdict(_common.wait_seconds, text) == expected
    if expected is None:  # the same meaning too: None is "wait forever"
        assert _common.wait_seconds(text) == redlease.Lock(CLIENT, "x", timeout=float(text)).timeout


@pytest.mark.parametrize("text", ["orders:42", "", " ", "a{b}", "zürich"])
def test_name_as_the_library(text: str) -> None:
    expected = library_verdict(lambda: redlease.Lock(CLIENT, text))
    assert cli_verdict(_common.lock_name, text) == expected


@pytest.mark.parametrize("text", ["redlease", "app.v2", "", "a b", "a{b", "b}", "tab\t"])
def test_prefix_as_the_library(text: str) -> None:
    expected = library_verdict(lambda: redlease.Lock(CLIENT, "x", prefix=text))
    assert cli_verdict(_common.key_prefix, text) == expected


def test_text_that_is_not_a_number_or_not_utf8_is_refused_with_its_own_message() -> None:
    """What only a command line can get wrong (the library receives typed values)."""
    assert cli_verdict(_common.lease_seconds, "ten") == "not a number of seconds: 'ten'"
    assert cli_verdict(_common.wait_seconds, "") == "not a number of seconds: ''"
    assert cli_verdict(_common.count("workers"), "1.5") == "not an integer: '1.5'"
    assert cli_verdict(_common.count("workers"), "0") == "workers must be >= 1, got 0"
    undecodable = b"lock\xff".decode(errors="surrogateescape")  # argv that is not UTF-8
    for parse in (_common.lock_name, _common.key_prefix):
        assert cli_verdict(parse, undecodable) == f"not valid UTF-8: {undecodable!r}"
