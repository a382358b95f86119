"""``kept()``: a copy of an error that is safe to keep (no traceback, cause or context)."""

from __future__ import annotations

import gc
import weakref

from redis.exceptions import ConnectionError, MovedError, RedisError

from redlease._core.kept import kept


class _Holder:
    def fail(self) -> None:
        raise ConnectionError("closed by the server")


def caught() -> tuple[BaseException, weakref.ref[_Holder]]:
    holder = _Holder()
    try:
        try:
            holder.fail()
        except ConnectionError as inner:
            raise RedisError("while reading") from inner
    except RedisError as exc:
        return exc, weakref.ref(holder)
    raise AssertionError("unreachable")


def test_a_kept_copy_has_the_class_and_message_and_no_frames() -> None:
    exc, _ = caught()
    copy = kept(exc)
    assert type(copy) is RedisError and str(copy) == "while reading"
    assert copy.__traceback__ is None and copy.__cause__ is None and copy.__context__ is None
    assert exc.__cause__ is not None  # the original is left as it was (raised to a caller)


def test_keeping_the_copy_lets_the_frames_locals_die() -> None:
    exc, ref = caught()
    copy = kept(exc)
    del exc
    gc.collect()
    assert ref() is None
    assert str(copy) == "while reading"


def test_twin_keeping_the_error_itself_keeps_the_frames_locals() -> None:
    """The check above would catch a kept original: its cause's frame holds the object."""
    exc, ref = caught()
    gc.collect()
    assert ref() is not None
    del exc


def test_attributes_of_plain_values_are_kept_others_become_text() -> None:
    moved = kept(MovedError("3999 127.0.0.1:6381"))
    assert isinstance(moved, MovedError) and (moved.host, moved.port) == ("127.0.0.1", 6381)

    class Carrying(Exception):
        def __init__(self, message: str) -> None:
            super().__init__(message)
            self.payload = _Holder()

    copy = kept(Carrying("with a payload"), ConnectionError)
    assert type(copy) is ConnectionError
    assert str(copy) == "Carrying: with a payload"


def test_an_error_whose_class_cannot_be_copied_becomes_the_fallback() -> None:
    class Picky(Exception):
        def __init__(self, a: int, b: int) -> None:
            super().__init__(f"{a} and {b}")

    copy = kept(Picky(1, 2))
    assert type(copy) is RuntimeError and str(copy) == "Picky: 1 and 2"
