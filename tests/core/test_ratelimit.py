"""The rate limiter's pure core, without Redis: keys, argument checks, reply decoding."""

from __future__ import annotations

import pytest

from redlease._core import ratelimit as core
from redlease._core.rates import Rate


def one_key(name: bytes, algo: core.Algorithm, subject: bytes, window: float = 1.0) -> bytes:
    (key,) = core.keys("p", core.limiter_name(name), algo, subject, (Rate(window, 5),))
    return key


def test_the_subject_is_the_hash_tag_and_keys_are_distinct() -> None:
    assert one_key(b"api", "gcra", b"user:42") == b"p:ratelimit:api:gcra:1000:{user:42}"
    made = {
        one_key(name, algo, subject)
        for name, subject in ((b"a:b", b"c"), (b"a", b"b:c"), (b"a", b"b}:c"), (b"a}", b"c"))
        for algo in core.ALGORITHMS
    }
    assert len(made) == 4 * len(core.ALGORITHMS)


def test_braces_in_a_name_are_escaped_so_the_subject_stays_the_hash_tag() -> None:
    key = one_key(b"a{b}%", "fixed", b"s")
    assert key == b"p:ratelimit:a%7Bb%7D%25:fixed:1000:{s}"
    assert key.index(b"{") == key.index(b"{s}")
    # the escape is one-to-one: a name that looks escaped stays apart from the braced one
    assert one_key(b"a%7Bb%7D%25", "fixed", b"s") != key


def test_the_window_is_in_the_key() -> None:
    """A limiter reconfigured from 5/day to 5/second reads none of the old counters."""
    assert one_key(b"api", "fixed", b"s", 86400.0) != one_key(b"api", "fixed", b"s", 1.0)


def test_decode() -> None:
    refused = core.decode([0, 0, 1_500_000, 2_000_000], 5)
    assert (refused.allowed, refused.retry_after, refused.reset_after, refused.limit) == (
        False,
        1.5,
        2.0,
        5,
    )
    assert core.decode([1, 4, 7, 10], 5).retry_after == 0.0
    for raw in (None, [1, 2, 3], [2, 0, 0, 0], ["x", 0, 0, 0]):
        with pytest.raises(ValueError, match="rate limit script"):
            core.decode(raw, 5)
