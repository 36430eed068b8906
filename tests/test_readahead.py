"""readahead.read_ahead: a source produced in a thread, in order, with the caller's context."""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator

import pytest

from groundscope.readahead import read_ahead

_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def _source(n: int, fail_at: int | None = None) -> Iterator[tuple[int, str, str]]:
    for i in range(n):
        if i == fail_at:
            raise ValueError(f"bad record {i}")
        yield i, _WHO.get(), threading.current_thread().name


def test_items_come_in_order_from_another_thread_with_the_callers_context() -> None:
    _WHO.set("the run")
    got = list(read_ahead(_source(200), 8))
    assert [i for i, _, _ in got] == list(range(200))
    assert {who for _, who, _ in got} == {"the run"}
    assert {name for _, _, name in got} == {"groundscope-read-ahead"}


def test_an_error_of_the_source_is_raised_where_the_item_was_wanted() -> None:
    it = read_ahead(_source(10, fail_at=3), 4)
    assert [next(it)[0] for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="bad record 3"):
        next(it)


def test_closing_early_stops_the_thread_and_closes_the_source() -> None:
    closed = threading.Event()

    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    it = read_ahead(endless(), 2, name="gs-test-ahead")
    assert next(it) == 0
    it.close()
    assert closed.wait(5)
    for thread in threading.enumerate():
        if thread.name == "gs-test-ahead":
            thread.join(5)
            assert not thread.is_alive()
