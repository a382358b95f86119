"""The rate limiter's pure core, without Redis: keys, argument checks, reply decoding."""

from __future__ import annotations

import pytest

from redlease._core import ratelimit as core


def test_the_subject_is_the_hash_tag_and_keys_are_distinct() -> None:
    assert core.key("p", b"api", "gcra", b"user:42") == b"p:ratelimit:api:gcra:{user:42}"
    made = {
        core.key("p", name, algo, subject)
        for name, subject in ((b"a:b", b"c"), (b"a", b"b:c"), (b"a", b"b}:c"), (b"a}", b"c"))
        if b"}" not in name
        for algo in core.ALGORITHMS
    }
    assert len(made) == 3 * len(core.ALGORITHMS)


def test_argument_checks() -> None:
    assert core.algorithm("gcra") == "gcra"
    assert core.cost(3, 3) == 3
    with pytest.raises(ValueError, match="never pass"):
        core.cost(4, 3)
    with pytest.raises(ValueError, match="braces"):
        core.limiter_name(b"a{b")


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
