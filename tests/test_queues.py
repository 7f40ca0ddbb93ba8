"""Tests of queuepipe.queues: TF's queue semantics, exactly-once delivery, and the extras.

The generic tests run against every queue kind through ``make``: a queue of int64 scalars
(for PriorityQueue, the priority is the element, so increasing input leaves in order).
"""

import copy
import re
import threading
import tracemalloc
import warnings
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from helpers import producers_and_consumers, runs_beside, wait_until

import queuepipe as qp
from queuepipe import _queue_base, queues
from queuepipe.errors import (
    CancelledError, DataLossError, DeadlineExceededError, InvalidArgumentError, OutOfRangeError,
)

KINDS = ["fifo", "shuffle", "padding", "priority"]
ORDERED = ["fifo", "padding", "priority"]


def make(kind, capacity, name="q"):
    """A queue of int64 scalars of the given kind."""
    if kind == "fifo":
        return qp.FIFOQueue(capacity, [qp.int64], shapes=[[]], name=name)
    if kind == "shuffle":
        return qp.RandomShuffleQueue(capacity, 0, [qp.int64], shapes=[[]], seed=3, name=name)
    if kind == "padding":
        return qp.PaddingFIFOQueue(capacity, [qp.int64], shapes=[[]], name=name)
    return qp.PriorityQueue(capacity, [], name=name)


def in_order(kind, got, expected):
    """Exact order for ordered kinds, the exact multiset for RandomShuffleQueue."""
    got = [int(x) for x in got]
    if kind == "shuffle":
        return Counter(got) == Counter(expected)
    return got == list(expected)


class Call(threading.Thread):
    """Runs ``fn(*args, **kwargs)`` in a thread and keeps its result or its exception."""

    def __init__(self, fn, *args, **kwargs):
        super().__init__(daemon=True)
        self.fn, self.args, self.kwargs = fn, args, kwargs
        self.result = self.error = None

    def run(self):
        try:
            self.result = self.fn(*self.args, **self.kwargs)
        except BaseException as e:  # noqa: B902 - handed to the test
            self.error = e

    def finish(self, timeout=5.0):
        self.join(timeout)
        assert not self.is_alive(), f"{self.fn} did not return"
        return self


def blocked(fn, *args, **kwargs):
    """Starts ``fn`` in a thread and proves it blocks."""
    call = Call(fn, *args, **kwargs)
    call.start()
    call.join(0.1)
    assert call.is_alive(), f"{fn} returned without blocking: {call.result!r} {call.error!r}"
    return call


# -- structure and order -------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_elements_leave_in_the_queues_order(kind):
    q = make(kind, 20)
    q.enqueue(0)
    q.enqueue_many(np.arange(1, 6))
    q.enqueue(np.int64(6))
    got = [q.dequeue()] + list(q.dequeue_many(3)) + list(q.dequeue_up_to(3))
    assert in_order(kind, got, range(7))
    assert q.size() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_one_component_queue_takes_and_returns_bare_values(kind):
    q = make(kind, 5)
    q.enqueue(1)
    q.enqueue([2])
    q.enqueue((3,))
    q.enqueue_many([np.array([4, 5])])
    first = q.dequeue()
    assert isinstance(first, np.int64)
    batch = q.dequeue_many(4)
    assert isinstance(batch, np.ndarray) and batch.dtype == np.int64 and batch.shape == (4,)
    assert in_order(kind, [first] + list(batch), [1, 2, 3, 4, 5])


def test_a_list_of_the_declared_rank_is_the_value_not_a_wrapper():
    q = qp.FIFOQueue(3, qp.int32, shapes=[1])
    q.enqueue([5])
    q.enqueue([np.array([6], dtype=np.int32)])
    assert q.dequeue().tolist() == [5]
    assert q.dequeue().tolist() == [6]


def test_tuple_elements_and_batches():
    q = qp.FIFOQueue(10, [qp.int64, qp.float32, qp.string], shapes=[[], [2], []])
    q.enqueue((1, [0.5, 1.5], "é"))
    q.enqueue_many(([2, 3], np.ones((2, 2)), [b"b", b"c"]))
    one = q.dequeue()
    assert isinstance(one, tuple) and len(one) == 3
    assert one[0] == 1 and one[1].dtype == np.float32 and one[1].tolist() == [0.5, 1.5]
    assert one[2] == "é".encode("utf-8") and type(one[2]) is bytes
    ids, floats, strings = q.dequeue_many(2)
    assert ids.tolist() == [2, 3] and floats.shape == (2, 2) and floats.dtype == np.float32
    assert strings.dtype == object and strings.tolist() == [b"b", b"c"]


def test_named_components_are_dicts():
    q = qp.FIFOQueue(5, [qp.int64, qp.string], shapes=[[], []], names=["id", "text"])
    q.enqueue({"id": 1, "text": b"one"})
    q.enqueue_many({"id": [2, 3], "text": ["two", "three"]})
    assert q.dequeue() == {"id": 1, "text": b"one"}
    batch = q.dequeue_many(2)
    assert set(batch) == {"id", "text"}
    assert batch["id"].tolist() == [2, 3] and batch["text"].tolist() == [b"two", b"three"]
    assert q.names == ["id", "text"]


def test_named_queue_rejects_missing_extra_keys_and_tuples():
    q = qp.FIFOQueue(5, [qp.int64, qp.string], names=["id", "text"], name="q")
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' expects keys \['id', 'text'\]: missing \['text'\], "
                             r"unexpected \[\] \(Keys in dictionary to enqueue do not match "
                             r"names of Queue\)$"):
        q.enqueue({"id": 1})
    with pytest.raises(InvalidArgumentError, match=r"unexpected \['label'\] \(Keys"):
        q.enqueue({"id": 1, "text": b"", "label": 2})
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' has names \['id', 'text'\].*"
                                                   r"\(You must enqueue a dictionary in a "
                                                   r"Queue with names\)$"):
        q.enqueue((1, b""))


def test_wrong_number_of_components():
    q = qp.FIFOQueue(5, [qp.int64, qp.int64], name="q")
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' has 2 components, got 3 values$"):
        q.enqueue((1, 2, 3))
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' has no names.*\(Queue must "
                                                   r"have names to enqueue a dictionary\)$"):
        q.enqueue({"a": 1, "b": 2})


# -- dtypes and shapes ---------------------------------------------------------------------


def test_wrong_dtype_is_rejected_naming_the_component():
    q = qp.FIFOQueue(5, [qp.int64, qp.uint8], names=["id", "pixel"], name="q")
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 'id': expected dtype int64, got 'abc'"):
        q.enqueue({"id": "abc", "pixel": 1})
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 'id': expected dtype int64, got 1\.5"):
        q.enqueue({"id": 1.5, "pixel": 1})
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 'pixel': expected dtype uint8, got 300"):
        q.enqueue({"id": 1, "pixel": 300})
    assert q.size() == 0


def test_wrong_shape_is_rejected_with_expected_and_got():
    q = qp.FIFOQueue(5, [qp.float32, qp.int64], shapes=[[2, None], []], name="q")
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected shape \[2, \?\], "
                             r"got shape \[3, 1\] \(Shape mismatch in tuple component 0\. "
                             r"Expected \[2,\?\], got \[3,1\]\)$"):
        q.enqueue((np.zeros((3, 1)), 1))
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 1: expected shape \[\], "
                             r"got element shape \[2\] \(Shape mismatch in tuple component 1\. "
                             r"Expected \[4\], got \[4,2\]\)$"):  # TF's words: batch shapes
        q.enqueue_many((np.zeros((4, 2, 1)), np.zeros((4, 2), dtype=np.int64)))
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' component 0: enqueue_many needs"):
        q.enqueue_many((1.0, 2))
    with pytest.raises(InvalidArgumentError, match=r"disagree on the batch size: \[4, 3\]$"):
        q.enqueue_many((np.zeros((4, 2, 1)), [1, 2, 3]))
    q.enqueue((np.zeros((2, 7)), 1))  # the None dim is free
    assert q.size() == 1


def test_strings_component_rejects_numbers():
    q = qp.FIFOQueue(5, qp.string, shapes=[[]], name="q")
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected dtype string \(bytes\), got 7$"):
        q.enqueue_many([[b"a", 7]])


def test_an_object_array_of_strings_is_taken_as_bytes_and_copied():
    q = qp.FIFOQueue(9, qp.string, shapes=[[]], name="q")
    words = np.array([b"a", b"bc", b""], dtype=object)  # as a parse makes them
    q.enqueue_many([words])
    words[0] = b"changed"  # the queue holds its own references
    q.enqueue_many([np.array(["d", np.bytes_(b"e"), b"f"], dtype=object)])
    assert q.dequeue_many(6).tolist() == [b"a", b"bc", b"", b"d", b"e", b"f"]
    with pytest.raises(InvalidArgumentError, match=r"expected dtype string \(bytes\), got 7$"):
        q.enqueue_many([np.array([b"a", 7], dtype=object)])


def test_dtypes_are_taken_from_the_first_element():
    q = qp.FIFOQueue(5, name="q")
    assert q.dtypes is None and q.shapes is None
    q.enqueue((1.5, "text", np.arange(3, dtype=np.int16)))
    assert q.dtypes == [np.dtype(np.float64), qp.string, np.dtype(np.int16)]
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' has 3 components, got 2 values$"):
        q.enqueue((1.0, b"x"))
    with pytest.raises(InvalidArgumentError, match=r"^Queue 'q' component 2: expected dtype int16"):
        q.enqueue((2.0, b"x", [0.5]))
    q.enqueue((2.0, b"y", [4, 5]))
    assert q.dequeue()[1] == b"text"
    value, text, arr = q.dequeue()
    assert value == 2.0 and text == b"y" and arr.dtype == np.int16 and arr.tolist() == [4, 5]


def test_unknown_shapes_stack_or_fail_leaving_the_elements():
    q = qp.FIFOQueue(5, [qp.int64], name="q")
    q.enqueue_many([np.arange(6).reshape(3, 2)])
    assert q.dequeue_many(2).tolist() == [[0, 1], [2, 3]]
    q.enqueue([[9, 9, 9]])
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: dequeue_many needs equal shapes to stack, "
                             r"got \[\(2,\), \(3,\)\]; use PaddingFIFOQueue to pad$"):
        q.dequeue_many(2)
    assert q.dequeue().tolist() == [4, 5]
    assert q.dequeue().tolist() == [9, 9, 9]


def test_queue_copies_values_in_and_out():
    for shapes in ([[3]], None):  # preallocated and per-element storage
        q = qp.FIFOQueue(5, [qp.float64], shapes=shapes)
        source = np.zeros(3)
        q.enqueue(source)
        source[:] = 7
        out = q.dequeue()
        assert out.tolist() == [0.0, 0.0, 0.0]
        q.enqueue_many([np.zeros((2, 3))])
        batch = q.dequeue_many(1)
        batch[:] = 5
        assert q.dequeue().tolist() == [0.0, 0.0, 0.0]


# -- construction --------------------------------------------------------------------------


@pytest.mark.parametrize("capacity", [0, -1, 1.5, True, "3"])
def test_capacity_must_be_a_positive_int(capacity):
    with pytest.raises(InvalidArgumentError,
                       match=rf"^capacity must be a positive int, "
                             rf"got {re.escape(repr(capacity))}$"):
        qp.FIFOQueue(capacity)


@pytest.mark.parametrize("min_after", [-1, 10, 11])
def test_min_after_dequeue_must_be_below_capacity(min_after):
    with pytest.raises(InvalidArgumentError,
                       match=rf"^min_after_dequeue must be >= 0 and < capacity \(10\), "
                             rf"got {min_after}$"):
        qp.RandomShuffleQueue(10, min_after)


def test_declarations_must_agree_in_length():
    with pytest.raises(InvalidArgumentError,
                       match=r"^dtypes, shapes and names must have one entry per component: "
                             r"dtypes has 2, names has 1$"):
        qp.FIFOQueue(3, [qp.int64, qp.int64], names=["a"])
    with pytest.raises(InvalidArgumentError, match=r"dtypes has 1, shapes has 2$"):
        qp.FIFOQueue(3, [qp.int64], shapes=[[], [2]])
    with pytest.raises(InvalidArgumentError, match=r"^dtypes\[0\]: unknown dtype 'int65'"):
        qp.FIFOQueue(3, ["int65"])


def test_padding_queue_requires_shapes_of_known_rank():
    with pytest.raises(InvalidArgumentError, match=r"^When providing partial shapes, a list of "
                                                   r"shapes must be provided: PaddingFIFOQueue "
                                                   r"requires shapes"):
        qp.PaddingFIFOQueue(3, [qp.int64], None)
    for shapes in ([[None], None], [None], [2]):  # TF's ValueError for each (unknown rank)
        with pytest.raises(InvalidArgumentError, match=r"^When providing partial shapes, a "
                                                       r"list of shapes must be provided"):
            qp.PaddingFIFOQueue(3, [qp.int64] * len(shapes), shapes)


def test_a_bare_int_among_the_shapes_is_a_one_dimensional_shape():
    q = qp.FIFOQueue(3, [qp.int64, qp.int64], shapes=((), (2)))  # (2) is the int 2, as in TF
    assert q.shapes == [(), (2,)]
    q.enqueue((1, [2, 3]))
    assert q.dequeue()[1].tolist() == [2, 3]


def test_priority_must_be_an_int64_scalar():
    q = qp.PriorityQueue(3, [qp.string], shapes=[[]], name="q")
    assert q.dtypes == [qp.int64, qp.string]
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected dtype int64, got 1\.5"):
        q.enqueue((1.5, b"x"))
    with pytest.raises(TypeError):  # what TF raises for a non-integer priority
        q.enqueue((2.5, b"x"))
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected shape \[\], got shape \[2\] "
                             r"\(Shape mismatch"):
        q.enqueue(([1, 2], b"x"))


def test_default_names_are_unique_and_given_names_kept():
    first, second = qp.FIFOQueue(1), qp.FIFOQueue(1)
    assert re.fullmatch(r"fifo_queue(_\d+)?", first.name)
    assert re.fullmatch(r"fifo_queue_\d+", second.name) and second.name != first.name
    assert re.fullmatch(r"random_shuffle_queue(_\d+)?", qp.RandomShuffleQueue(2, 0).name)
    assert re.fullmatch(r"padding_fifo_queue(_\d+)?", qp.PaddingFIFOQueue(2, [qp.int64], [[]]).name)
    assert re.fullmatch(r"priority_queue(_\d+)?", qp.PriorityQueue(2, []).name)
    assert qp.FIFOQueue(1, name="mine").name == qp.FIFOQueue(1, name="mine").name == "mine"


# -- closing -------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_enqueue_on_a_closed_queue_is_cancelled(kind):
    q = make(kind, 3)
    q.close()
    q.close()  # idempotent
    assert q.is_closed()
    with pytest.raises(CancelledError, match=r"^Queue 'q' is closed\.$"):
        q.enqueue(1)
    with pytest.raises(CancelledError, match=r"^Queue 'q' is closed\.$"):
        q.enqueue_many([[1, 2]])


@pytest.mark.parametrize("kind", KINDS)
def test_closed_queue_drains_then_raises_out_of_range(kind):
    q = make(kind, 5)
    q.enqueue_many([[0, 1, 2]])
    q.close()
    got = [q.dequeue(), q.dequeue()]
    with pytest.raises(OutOfRangeError,
                       match=r"^Queue 'q' is closed and has insufficient elements "
                             r"\(requested 2, current size 1\)$"):
        q.dequeue_many(2)
    got.append(q.dequeue())
    assert in_order(kind, got, [0, 1, 2])
    with pytest.raises(OutOfRangeError,
                       match=r"^Queue 'q' is closed and has insufficient elements "
                             r"\(requested 1, current size 0\)$"):
        q.dequeue()


@pytest.mark.parametrize("kind", KINDS)
def test_failed_dequeue_many_leaves_every_element_in_order(kind):
    q = make(kind, 10)
    q.enqueue_many([np.arange(5)])
    q.close()
    with pytest.raises(OutOfRangeError, match=r"\(requested 7, current size 5\)$"):
        q.dequeue_many(7)
    assert in_order(kind, q.dequeue_many(5), range(5))


@pytest.mark.parametrize("kind", ORDERED)
def test_dequeue_many_larger_than_capacity_puts_taken_elements_back_on_failure(kind):
    q = make(kind, 3)
    consumer = blocked(q.dequeue_many, 5)
    q.enqueue_many([np.arange(4)])  # returns once the consumer has made room
    q.close()
    consumer.finish()
    assert isinstance(consumer.error, OutOfRangeError)
    assert re.fullmatch(r"Queue 'q' is closed and has insufficient elements "
                        r"\(requested 5, current size 4\)", str(consumer.error))
    assert q.dequeue_up_to(10).tolist() == [0, 1, 2, 3]


def test_shuffle_dequeue_many_larger_than_capacity_puts_taken_elements_back_on_failure():
    q = qp.RandomShuffleQueue(3, 0, [qp.int64, qp.string], shapes=[[], []], seed=1)
    consumer = blocked(q.dequeue_many, 5)
    q.enqueue_many((np.arange(4), [b"s%d" % i for i in range(4)]))
    q.close()
    consumer.finish()
    assert isinstance(consumer.error, OutOfRangeError) and q.size() == 4  # more than capacity
    ids, strings = q.dequeue_up_to(10)
    assert sorted(ids.tolist()) == [0, 1, 2, 3]
    assert strings.tolist() == [b"s%d" % i for i in ids]


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_many_larger_than_capacity_succeeds_as_elements_arrive(kind):
    q = make(kind, 3)
    consumer = blocked(q.dequeue_many, 7)
    q.enqueue_many([np.arange(7)])
    assert in_order(kind, consumer.finish().result, range(7))


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_up_to_blocks_while_open_and_returns_the_rest_after_close(kind):
    q = make(kind, 10)
    q.enqueue_many([[0, 1]])
    consumer = blocked(q.dequeue_up_to, 3)
    q.close()
    assert in_order(kind, consumer.finish().result, [0, 1])
    with pytest.raises(OutOfRangeError, match=r"\(requested 3, current size 0\)$"):
        q.dequeue_up_to(3)


@pytest.mark.parametrize("kind", KINDS)
def test_dequeue_up_to_returns_a_full_batch_when_there_is_one(kind):
    q = make(kind, 10)
    q.enqueue_many([np.arange(6)])
    q.close()
    first = q.dequeue_up_to(4)
    assert len(first) == 4
    assert in_order(kind, list(first) + list(q.dequeue_up_to(4)), range(6))


@pytest.mark.parametrize("kind", KINDS)
def test_close_lets_pending_enqueues_finish(kind):
    q = make(kind, 1)
    q.enqueue(0)
    producer = blocked(q.enqueue, 1)
    q.close()
    producer.join(0.1)
    assert producer.is_alive()  # still waiting for room, as in TF
    first = q.dequeue()
    producer.finish()
    assert producer.error is None
    assert in_order(kind, [first, q.dequeue()], [0, 1])


@pytest.mark.parametrize("kind", KINDS)
def test_close_cancel_pending_enqueues_fails_them(kind):
    q = make(kind, 2)
    q.enqueue(0)
    single = blocked(q.enqueue_many, [[1, 2, 3]])  # one goes in, then it waits
    q.close(cancel_pending_enqueues=True)
    single.finish()
    assert isinstance(single.error, CancelledError)
    assert str(single.error) == "Queue 'q' is closed."
    assert in_order(kind, q.dequeue_up_to(5), [0, 1])  # the part enqueued stays


@pytest.mark.parametrize("kind", KINDS)
def test_close_cancel_wakes_a_blocked_enqueue(kind):
    q = make(kind, 1)
    q.enqueue(0)
    producer = blocked(q.enqueue, 1)
    q.close(cancel_pending_enqueues=True)
    assert isinstance(producer.finish().error, CancelledError)
    assert q.size() == 1


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("method", ["dequeue", "dequeue_many", "dequeue_up_to"])
def test_close_wakes_blocked_consumers(kind, method):
    q = make(kind, 4)
    args = () if method == "dequeue" else (2,)
    consumer = blocked(getattr(q, method), *args)
    q.close()
    assert isinstance(consumer.finish().error, OutOfRangeError)


# -- RandomShuffleQueue ----------------------------------------------------------------------


def test_shuffle_dequeue_waits_for_more_than_min_after_dequeue():
    q = qp.RandomShuffleQueue(10, 3, qp.int64, shapes=[], seed=1)
    q.enqueue_many(np.arange(3))
    consumer = blocked(q.dequeue)
    q.enqueue(3)
    assert int(consumer.finish().result) in range(4)
    assert q.size() == 3


def test_shuffle_dequeue_many_waits_for_n_plus_min_after_dequeue():
    q = qp.RandomShuffleQueue(10, 3, qp.int64, shapes=[], seed=1)
    q.enqueue_many(np.arange(4))
    consumer = blocked(q.dequeue_many, 2)
    q.enqueue(4)
    batch = consumer.finish().result
    assert len(batch) == 2 and q.size() == 3
    q.close()
    assert Counter(list(batch) + list(q.dequeue_up_to(5))) == Counter(range(5))


def test_shuffle_close_wakes_min_after_dequeue_wait_and_drops_the_rule():
    q = qp.RandomShuffleQueue(10, 5, qp.int64, shapes=[], seed=1)
    q.enqueue_many(np.arange(3))
    consumer = blocked(q.dequeue_many, 2)
    q.close()
    batch = consumer.finish().result
    assert Counter(list(batch) + [q.dequeue()]) == Counter(range(3))


def test_shuffle_with_min_after_dequeue_is_exactly_once_single_thread():
    q = qp.RandomShuffleQueue(50, 20, [qp.int64, qp.string], shapes=[[], []], seed=5)
    got = []
    for start in range(0, 200, 10):
        ids = np.arange(start, start + 10)
        q.enqueue_many((ids, [str(i) for i in ids]))
        while q.size() > 25:
            i, s = q.dequeue()
            assert s == str(i).encode()
            got.append(int(i))
    q.close()
    while True:
        try:
            ids, strings = q.dequeue_up_to(7)
        except OutOfRangeError:
            break
        assert strings.tolist() == [str(i).encode() for i in ids]
        got.extend(ids.tolist())
    assert Counter(got) == Counter(range(200))


def drain_seeded(seed):
    q = qp.RandomShuffleQueue(100, 10, [qp.int64], shapes=[[]], seed=seed)
    q.enqueue_many([np.arange(100)])
    got = [int(q.dequeue()) for _ in range(10)] + q.dequeue_many(30).tolist()
    q.close()
    return got + q.dequeue_up_to(100).tolist()


def test_seeded_shuffle_is_reproducible_and_permutes():
    first = drain_seeded(7)
    assert first == drain_seeded(7)
    assert sorted(first) == list(range(100))
    assert first != sorted(first)
    assert first != drain_seeded(8)


def enqueue_groups(q, sizes, start=0):
    """Enqueues the ints from ``start`` on in groups of ``sizes`` (a group of 1 by enqueue);
    returns the next int."""
    for size in sizes:
        if size == 1:
            q.enqueue(start)
        else:
            q.enqueue_many(np.arange(start, start + size))
        start += size
    return start


@pytest.mark.parametrize("groups", [[4, 3, 3], [1] * 10, [6, 1, 1, 2]],
                         ids=["enqueue_many", "enqueue", "mixed"])
def test_shuffle_picks_are_uniform_whatever_the_enqueue_order(groups):
    # 10 elements enqueued in groups (a group of 1 by enqueue); dequeue_many(3): each element
    # should be in the batch 3 times in 10, and in each of its places once in 10. Seeds
    # 0..2999 make the counts fixed; the bounds are 5 sigma wide.
    trials = 3000
    in_batch, first, last = Counter(), Counter(), Counter()
    for seed in range(trials):
        q = qp.RandomShuffleQueue(10, 0, qp.int64, shapes=[], seed=seed)
        enqueue_groups(q, groups)
        batch = q.dequeue_many(3).tolist()
        in_batch.update(batch)
        first[batch[0]] += 1
        last[batch[-1]] += 1
        assert sorted(batch + q.dequeue_many(7).tolist()) == list(range(10))
    for counts, p in ((in_batch, 0.3), (first, 0.1), (last, 0.1)):
        sigma = (trials * p * (1 - p)) ** 0.5
        assert all(abs(counts[i] - trials * p) < 5 * sigma for i in range(10)), counts


def test_an_element_enqueued_alone_between_dequeues_is_drawn_uniformly():
    # 9 elements, one dequeued; then element 9 alone; dequeue_many(3) from the 9 held: each
    # is in the batch 1 time in 3, the newest as any other (an older one only when it was not
    # the first dequeued: 8 times in 9 of that). Seeds 0..2999; 5 sigma bounds.
    trials = 3000
    in_batch = Counter()
    for seed in range(trials):
        q = qp.RandomShuffleQueue(10, 0, qp.int64, shapes=[], seed=seed)
        q.enqueue_many(np.arange(9))
        gone = int(q.dequeue())
        q.enqueue(9)
        batch = q.dequeue_many(3).tolist()
        assert gone not in batch
        in_batch.update(batch)
    for element, p in [(9, 1 / 3)] + [(i, 8 / 27) for i in range(9)]:
        sigma = (trials * p * (1 - p)) ** 0.5
        assert abs(in_batch[element] - trials * p) < 5 * sigma, (element, in_batch)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_seeded_shuffle_does_not_depend_on_how_enqueues_are_grouped(seed):
    def drain(groups):
        q = qp.RandomShuffleQueue(30, 5, qp.int64, shapes=[], seed=seed)
        got, start = [], 0
        for sizes in groups:  # the groups enqueued before each dequeue_many(4)
            start = enqueue_groups(q, sizes, start)
            got.append(q.dequeue_many(4).tolist())
        return got

    one_by_one = drain([[1] * 12, [1] * 4, [1] * 6])
    assert drain([[12], [4], [6]]) == one_by_one
    assert drain([[3, 1, 8], [2, 2], [1, 5]]) == one_by_one
    assert drain([[12], [4], [5, 1]]) == one_by_one


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_seeded_shuffle_queue_draws_the_same_with_and_without_the_core(seed, monkeypatch):
    def drain():
        q = qp.RandomShuffleQueue(300, 40, qp.int64, shapes=[], seed=seed)
        start, got = 0, []
        for sizes in ([100, 1, 60], [37], [5, 5, 5], [90]):
            start = enqueue_groups(q, sizes, start)
            got.append(q.dequeue_many(50).tolist())
        q.close()
        got.append(q.dequeue_up_to(300).tolist())
        return got

    core_order = drain()
    monkeypatch.setattr(queues, "_core_shuffle_in", None)
    assert drain() == core_order
    assert sorted(sum(core_order, [])) == list(range(303))


@pytest.mark.parametrize("seed", [0, 1])
def test_a_full_shuffle_buffer_draws_the_same_with_and_without_the_core(seed, monkeypatch):
    # chunks of 2,048 put in a buffer of 10,000 and more: the places come from the core's
    # draw_places there (choice's tail shuffle), from NumPy's choice on the pure path
    def drain():
        q = qp.RandomShuffleQueue(20480, 10000, qp.int64, shapes=[], seed=seed)
        got = []
        for start in range(0, 20480, 2048):
            q.enqueue_many(np.arange(start, start + 2048))
            if q.size() >= 10000 + 2048:
                got.append(q.dequeue_many(2048).tolist())
        q.close()
        got.append(q.dequeue_up_to(20480).tolist())
        return got

    core_order = drain()
    monkeypatch.setattr(queues, "_core_draw_places", None)
    monkeypatch.setattr(queues, "_core_shuffle_in", None)
    assert drain() == core_order
    assert sorted(sum(core_order, [])) == list(range(20480))


@pytest.mark.skipif(queues._core_draw_places is None, reason="the compiled core is not loaded")
@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(10001, 40000), st.floats(0.0, 1.0))
def test_the_core_draws_the_places_numpys_choice_draws(seed, n, share):
    # every (n, k) of choice's tail shuffle: the same places, the generator left the same
    k = min(n, n // 50 + 1 + int(share * n))
    ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
    assert queues._places(ours, n, k).tolist() == numpys.choice(n, size=k, replace=False) \
        .tolist()
    assert ours.bit_generator.state == numpys.bit_generator.state
    assert ours.integers(2**40) == numpys.integers(2**40)


@pytest.mark.skipif(queues._core_draw_places is None, reason="the compiled core is not loaded")
def test_a_numpy_whose_choice_draws_otherwise_gets_its_places_from_choice(monkeypatch):
    # the core copies this NumPy's way of drawing: checked once, choice is used if it differs
    assert queues._draws_as_choice()
    monkeypatch.setattr(queues, "_checked_draws", None)
    monkeypatch.setattr(queues, "_core_draw_places",
                        lambda capsule, n, k, out: out.__setitem__(slice(None), range(k)))
    assert not queues._draws_as_choice()
    got = queues._places(np.random.default_rng(4), 20000, 2048)
    assert got.tolist() == np.random.default_rng(4).choice(20000, 2048, replace=False).tolist()


@pytest.mark.skipif(queues._core_draw_places is None, reason="the compiled core is not loaded")
def test_draw_places_refuses_what_it_cannot_draw_and_draws_nothing():
    rng = np.random.default_rng(1)
    state = rng.bit_generator.state
    capsule = rng.bit_generator.capsule
    out = np.empty(3, dtype=np.int64)
    for args, message in [
            ((capsule, 10, 0, out[:0]), r"k \(0\) and n \(10\) must satisfy 0 < k <= n < "
                                        r"2\*\*32"),
            ((capsule, 2, 3, out), r"k \(3\) and n \(2\) must satisfy"),
            ((capsule, 2**32, 3, out), r"k \(3\) and n \(4294967296\) must satisfy"),
            ((capsule, 10, 2, out), r"out holds 3 items, not k \(2\)"),
            ((capsule, 10, 3, out.astype(np.int32)), r"out must be a writable C-contiguous "
                                                     r"int64 array"),
            ((object(), 10, 3, out), r"capsule must be a bit generator's capsule")]:
        with pytest.raises(ValueError, match=f"^draw_places: {message}"):
            queues._core_draw_places(*args)
    assert rng.bit_generator.state == state


@pytest.mark.parametrize("seed", [0, 1])
def test_an_arrival_pool_queue_does_not_depend_on_how_far_ahead_the_producer_is(seed):
    # The seeded one-thread batching functions' queue: a dequeue of n draws from the first
    # min_after_dequeue + n elements held, so enqueueing everything at once (and closing at
    # once) or just in time gives the same batches.
    def drain(ahead):
        q = queues._ArrivalPoolShuffleQueue(30, 5, qp.int64, shapes=[], seed=seed)
        if ahead:
            q.enqueue_many(np.arange(30))
            q.close()
        got = []
        for j in range(7):
            for element in range(q.size() + 4 * j, min(9 + 4 * j, 30)):
                q.enqueue(element)  # just what this dequeue may draw from
            if q.size() + 4 * j == 30 and not q.is_closed():
                q.close()  # closing late draws from the same pool as closing early
            got.append(q.dequeue_many(4).tolist())
        return got + [q.dequeue_up_to(30).tolist()]

    just_in_time = drain(ahead=False)
    assert drain(ahead=True) == just_in_time
    assert set(just_in_time[0]) <= set(range(9))  # drawn from the first 5 + 4
    assert sorted(sum(just_in_time, [])) == list(range(30))


# -- batches drawn ahead (read_batch_features) -------------------------------------------


def _drawn_ahead(q, size=4, limit=2):
    q._draw_ahead(size, limit)
    return q


@pytest.mark.parametrize("seed", [0, 1])
def test_batches_drawn_ahead_are_the_batches_the_consumer_would_draw(seed):
    def run(ahead):
        q = queues._ArrivalPoolShuffleQueue(40, 6, qp.int64, shapes=[], seed=seed)
        if ahead:
            _drawn_ahead(q, size=4, limit=3)
        got = []
        for chunk in np.array_split(np.arange(60), 6):
            q.enqueue_many(chunk)
            while q.size() >= 6 + 4:
                got.append(q.dequeue_many(4).tolist())
        q.close()
        return got + [q.dequeue_up_to(40).tolist()]

    without = run(ahead=False)
    assert run(ahead=True) == without
    assert sorted(sum(without, [])) == list(range(60))


def test_batches_drawn_ahead_count_in_size_and_against_the_capacity():
    q = _drawn_ahead(qp.FIFOQueue(10, qp.int64, shapes=[]))
    q.enqueue_many(np.arange(9))
    assert len(q._ahead) == 2 and q.size() == 9  # two batches of 4 drawn, one element held
    with pytest.raises(DeadlineExceededError):
        q.enqueue_many(np.arange(9, 11), timeout=0.01)  # 9 + 2 > 10: 9 goes in, 10 not
    assert q.size() == 10 and len(q._ahead) == 2
    assert q.dequeue_many(4).tolist() == [0, 1, 2, 3]
    assert q.size() == 6 and q.stats()["size"] == 6 and q.stats()["dequeued"] == 4


def test_a_dequeue_of_another_size_puts_the_batches_drawn_ahead_back_in_order():
    q = _drawn_ahead(qp.FIFOQueue(20, qp.int64, shapes=[]))
    q.enqueue_many(np.arange(9))
    assert len(q._ahead) == 2
    assert q.dequeue() == 0 and not q._ahead  # back at the head, in their order
    assert q.dequeue_many(3).tolist() == [1, 2, 3]
    q.close()
    assert q.dequeue_up_to(20).tolist() == [4, 5, 6, 7, 8]


@pytest.mark.parametrize("size", [1, 3])
def test_a_dequeue_of_another_size_waiting_gets_its_size_and_nothing_is_drawn_meanwhile(size):
    # (review: the enqueue drew ahead while a dequeue of another size waited, which then
    # handed out a drawn batch of 4 as it was, or, dequeue(), waited with 8 elements held)
    q = _drawn_ahead(qp.FIFOQueue(20, qp.int64, shapes=[]))
    got = []

    def take():
        got.append(q.dequeue(timeout=10) if size == 1 else q.dequeue_many(size, timeout=10))

    consumer = threading.Thread(target=take)
    consumer.start()
    wait_until(lambda: q._needs, "the dequeue waits")
    q.enqueue_many(np.arange(8))
    consumer.join()
    assert np.asarray(got[0]).tolist() == (0 if size == 1 else [0, 1, 2])
    assert q.size() == 8 - size and q.dequeue_many(4).tolist() == list(range(size, size + 4))


def test_a_closed_queue_hands_out_its_batches_drawn_ahead_first():
    q = _drawn_ahead(qp.FIFOQueue(20, qp.int64, shapes=[]))
    q.enqueue_many(np.arange(10))
    q.close()
    assert [q.dequeue_up_to(4).tolist() for _ in range(3)] == [[0, 1, 2, 3], [4, 5, 6, 7],
                                                             [8, 9]]
    with pytest.raises(OutOfRangeError):
        q.dequeue_up_to(4)


def test_a_batch_drawn_ahead_that_cannot_be_finished_fails_its_consumer_and_stays():
    # a component of unknown shape: finishing stacks it, and these elements differ in shape
    q = _drawn_ahead(qp.FIFOQueue(20, qp.int64, shapes=[None]), size=2, limit=1)
    q.enqueue_many([np.zeros(2, np.int64)])
    q.enqueue_many([np.zeros(3, np.int64)])
    assert q._ahead[0][1] is _queue_base._FAILED
    with pytest.raises(InvalidArgumentError, match=r"dequeue_many needs equal shapes"):
        q.dequeue_many(2)
    assert q.size() == 2 and not q._ahead
    assert [len(x) for x in (q.dequeue(), q.dequeue())] == [2, 3]


def test_a_batch_finish_takes_the_batches_one_thread_drew_ahead_in_one_call():
    # read_batch_features' parse: every batch handed out, drawn ahead or by the consumer,
    # goes through it as the columns hold it; those drawn by one enqueue_many together
    calls = []

    def finish(batches):
        calls.append([batch["x"].tolist() for batch in batches])
        return [{"sum": int(batch["x"].sum()), "n": len(batch["y"])} for batch in batches]

    q = qp.FIFOQueue(20, [qp.int64, qp.string], shapes=[[], []], names=["x", "y"])
    q._draw_ahead(4, 3, finish)
    q.enqueue_many({"x": np.arange(10), "y": [b"r"] * 10})
    assert calls == [[[0, 1, 2, 3], [4, 5, 6, 7]]]
    assert q.dequeue_many(4) == {"sum": 6, "n": 4} and q.dequeue_many(4) == {"sum": 22, "n": 4}
    q.close()
    assert q.dequeue_up_to(4) == {"sum": 17, "n": 2}  # drawn by the consumer: alone
    assert calls[1:] == [[[8, 9]]]


def test_an_enqueue_waiting_for_room_first_finishes_the_batches_a_dequeue_would_take():
    # Its thread draws and finishes them before it waits, so that the consumer picks them up
    # instead of parsing them itself, under the queue's lock (with two read_batch_features
    # threads waiting for room, the consumer parsed a third of the batches).
    finished_by = []

    def finish(batches):
        finished_by.extend([threading.current_thread().name] * len(batches))
        return [batch.tolist() for batch in batches]

    q = qp.FIFOQueue(8, qp.int64, shapes=[])
    q._draw_ahead(4, 1, finish)
    producer = threading.Thread(target=q.enqueue_many, args=(np.arange(12),), name="producer")
    producer.start()
    try:
        wait_until(lambda: q._room_needs, "the enqueue waits for room")
        assert finished_by == ["producer"]  # [0, 1, 2, 3], before it waited
        assert q.dequeue_many(4) == [0, 1, 2, 3]  # picked up: room for the rest
    except BaseException:
        q.close(cancel_pending_enqueues=True)  # (its enqueue ends, with CancelledError)
        raise
    finally:
        producer.join(timeout=10)
    assert not producer.is_alive()
    assert [q.dequeue_many(4), q.dequeue_many(4)] == [[4, 5, 6, 7], [8, 9, 10, 11]]
    assert q.size() == 0


def test_a_put_that_draws_ahead_wakes_a_waiting_dequeue_only_once_its_batch_is_finished():
    # Woken by the put, the dequeue would find the batch drawn and unfinished, and wait again:
    # two sleeps and wake-ups of the consumer every chunk instead of one.
    q = qp.FIFOQueue(20, qp.int64, shapes=[])
    wakes, at_finish = [], []
    notify_all = q._not_empty.notify_all

    def counted_notify_all():
        wakes.append(1)
        notify_all()

    def finish(batches):
        at_finish.append(len(wakes))
        return [batch.tolist() for batch in batches]

    q._draw_ahead(4, 2, finish)
    q._not_empty.notify_all = counted_notify_all
    got = []
    consumer = threading.Thread(target=lambda: got.append(q.dequeue_many(4)))
    consumer.start()
    try:
        wait_until(lambda: q._needs, "the dequeue waits")
        q.enqueue_many(np.arange(8))
    finally:
        q.close(cancel_pending_enqueues=True)
        consumer.join(timeout=10)
    assert not consumer.is_alive()
    assert at_finish == [0]  # no wake-up before the finish
    assert got == [[0, 1, 2, 3]] and q.dequeue_many(4) == [4, 5, 6, 7]


def test_a_draw_ahead_that_raises_after_a_put_still_wakes_the_waiting_dequeue():
    # the put skipped the wake-up for the batch it was about to draw; the draw failing, the
    # dequeue must not sleep on through elements it could take
    q = qp.FIFOQueue(20, qp.int64, shapes=[])
    q._draw_ahead(4, 2, lambda batches: [batch.tolist() for batch in batches])
    take = q._take

    def failing_take(n):
        q._take = take  # once
        raise RuntimeError("no memory for the batch")

    got = []
    consumer = threading.Thread(target=lambda: got.append(q.dequeue_many(4)))
    consumer.start()
    try:
        wait_until(lambda: q._needs, "the dequeue waits")
        q._take = failing_take
        with pytest.raises(RuntimeError, match="no memory"):
            q.enqueue_many(np.arange(8))
        wait_until(lambda: got, "the dequeue took its batch")
    finally:
        q.close(cancel_pending_enqueues=True)
        consumer.join(timeout=10)
    assert got == [[0, 1, 2, 3]]


def test_a_batch_finish_that_raises_fails_the_consumer_with_the_records_kept():
    # a group drawn ahead that raises is drawn again by the consumer, a batch at a time: the
    # good batch comes out, the bad one raises its own error and stays in the queue
    def finish(batches):
        for batch in batches:
            if 19 in batch.tolist():
                raise InvalidArgumentError(f"bad record in {batch.tolist()}")
        return [batch.tolist() for batch in batches]

    q = qp.FIFOQueue(20, qp.int64, shapes=[])
    q._draw_ahead(4, 2, finish)
    q.enqueue_many(np.arange(14, 22))
    assert [entry[1] for entry in q._ahead] == [_queue_base._FAILED] * 2
    assert q.dequeue_many(4) == [14, 15, 16, 17]
    for _ in range(2):
        with pytest.raises(InvalidArgumentError, match=r"^bad record in \[18, 19, 20, 21\]"):
            q.dequeue_many(4)
        assert q.size() == 4


def test_batches_drawn_after_a_finish_are_marked_failed_when_a_later_draw_raises(monkeypatch):
    # (review: the draws that follow a finish, in _finish_ahead's loop, left the batches
    # drawn before one that raised unfinished: their consumer waited for them for ever)
    taken = []

    def finish(batches):
        if not taken:  # the first finish: room for more drawn ahead, the third draw fails
            q._ahead_limit = 3
            real_take = q._take

            def take(n):
                if len(taken) == 2:  # (after one more batch drawn)
                    raise MemoryError("injected")
                taken.append(n)
                return real_take(n)

            monkeypatch.setattr(q, "_take", take)
            taken.append(0)
        return [batch.tolist() for batch in batches]

    q = qp.FIFOQueue(20, qp.int64, shapes=[])
    q._draw_ahead(2, 1, finish)
    with pytest.raises(MemoryError, match="injected"):
        q.enqueue_many(np.arange(8))
    monkeypatch.undo()
    assert [entry[1] for entry in q._ahead] == [[0, 1], _queue_base._FAILED]
    assert q.dequeue_many(2, timeout=5) == [0, 1]
    assert q.dequeue_many(2, timeout=5) == [2, 3]  # drawn again, by the consumer
    assert q.size() == 4


def test_a_shuffle_queue_gives_the_batches_drawn_before_a_draw_that_raises(monkeypatch):
    # its batches drawn ahead are drawn first and read together: a draw that fails must not
    # lose those drawn before it
    q = qp.RandomShuffleQueue(20, 0, qp.int64, shapes=[], seed=1)
    q.enqueue_many(np.arange(12))
    real_draw, draws = q._draw, []

    def draw(n):
        if len(draws) == 2:
            raise MemoryError("injected")
        draws.append(n)
        return real_draw(n)

    monkeypatch.setattr(q, "_draw", draw)
    given = []
    with pytest.raises(MemoryError, match="injected"):
        for raw in q._take_batches(3, 4):
            given.append(raw[0].tolist())
    monkeypatch.undo()
    left = q.dequeue_many(q.size()).tolist()
    assert len(given) == 2 and sorted(sum(given, []) + left) == list(range(12))


@pytest.mark.parametrize("then", ["finish", "put back"])
def test_a_dequeue_waiting_for_a_batch_being_finished_is_woken_by_its_finish_not_by_puts(then):
    # It registers no need for elements (an enqueue's wake-up would find the batch still
    # unfinished: two GIL hand-overs for nothing); the finishing thread wakes it, and so does
    # a dequeue of another size that puts the batch back.
    started, release = threading.Event(), threading.Event()

    def finish(batches):
        if not started.is_set():  # the enqueue's: held until released
            started.set()
            assert release.wait(10)
        return [batch.tolist() for batch in batches]

    q = qp.FIFOQueue(20, qp.int64, shapes=[])
    q._draw_ahead(4, 1, finish)
    producer = threading.Thread(target=q.enqueue_many, args=(np.arange(4),))
    producer.start()
    assert started.wait(10)
    got = []
    consumer = threading.Thread(target=lambda: got.append(q.dequeue_many(4, timeout=10)))
    consumer.start()
    wait_until(lambda: q._not_empty._waiters, "the dequeue waits for the finish")
    assert q._needs == []  # (no element wakes it)
    q.enqueue_many(np.arange(4, 8))  # more than it asks for: it goes on waiting
    assert consumer.is_alive() and q._needs == []
    if then == "put back":
        assert q.dequeue() == 0  # puts the batch back and takes its head
        consumer.join(10)
        assert got == [[1, 2, 3, 4]]
    release.set()
    producer.join(10)
    consumer.join(10)
    if then == "finish":
        assert got == [[0, 1, 2, 3]]
    assert not producer.is_alive() and not consumer.is_alive()


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
def test_a_snapshot_lists_the_batches_drawn_ahead_first_and_a_load_draws_them_again(kind):
    def make_queue():
        queue = queues._ArrivalPoolShuffleQueue(30, 5, qp.int64, shapes=[], seed=3) \
            if kind == "shuffle" else qp.FIFOQueue(30, qp.int64, shapes=[])
        return _drawn_ahead(queue)

    q = make_queue()
    q.enqueue_many(np.arange(20))
    assert len(q._ahead) == 2
    held, order = q._snapshot(0)
    assert order["ahead"] == 2 and order["ahead_size"] == 4 and len(held) == 20
    assert held[:8].tolist() == np.concatenate([raw[0] for raw, _ in q._ahead]).tolist()
    loaded = make_queue()
    loaded._load(held, dict(order))
    q.close()
    loaded.close()
    for _ in range(5):
        assert loaded.dequeue_up_to(4).tolist() == q.dequeue_up_to(4).tolist()
    with pytest.raises(InvalidArgumentError, match=r"cannot hold 9 batches of 4 drawn ahead"):
        make_queue()._load(held, {**order, "ahead": 9})


def test_an_arrival_pool_queue_takes_arrivals_in_a_few_batches_at_a_time_and_draws_uniformly():
    # min_after_dequeue 8, batches of 2: the pool is brought to 8 + 2 = 10 whenever it holds
    # fewer than 10 - min(3 * 2, 8 // 2) = 6, so its sizes run 10, 8, 6, then 4 + 6 arrivals.
    # Every element in a pool is in that batch with chance 2 / size, first in it with half
    # that; from the schedule, the exact chance of (element, batch) over seeds 0..2999, 5
    # sigma wide. (Drawing from every element held, or taking arrivals in each time, fails.)
    trials, batches = 3000, 8
    sizes, joins, shuffled, arrived = [], [], 0, 0
    for _ in range(batches):
        if shuffled < 6:
            joins.append(range(arrived, arrived + 10 - shuffled))
            arrived, shuffled = arrived + 10 - shuffled, 10
        else:
            joins.append(range(0))
        sizes.append(shuffled)
        shuffled -= 2
    chance = np.zeros((arrived, batches))
    for t, joined in enumerate(joins):
        for element in joined:
            left = 1.0
            for u in range(t, batches):
                chance[element, u] = left * 2 / sizes[u]
                left *= 1 - 2 / sizes[u]
    in_batch, first = np.zeros_like(chance), np.zeros_like(chance)
    for seed in range(trials):
        q = queues._ArrivalPoolShuffleQueue(40, 8, qp.int64, shapes=[], seed=seed)
        q.enqueue_many(np.arange(40))
        for t in range(batches):
            batch = q.dequeue_many(2).tolist()
            assert max(batch) < arrived
            in_batch[batch, t] += 1
            first[batch[0], t] += 1
    for counts, p in ((in_batch, chance), (first, chance / 2)):
        sigma = np.sqrt(trials * p * (1 - p))
        assert np.all(np.abs(counts - trials * p) <= 5 * sigma + 1e-9), (counts, trials * p)


# -- many threads ----------------------------------------------------------------------------


def make_record(i):
    return i, np.array([i, -i], dtype=np.float32), str(i).encode()


@pytest.mark.parametrize("kind", ["fifo", "shuffle"])
def test_exactly_once_with_four_producers_and_four_consumers(kind):
    dtypes, shapes = [qp.int64, qp.float32, qp.string], [[], [2], []]
    if kind == "fifo":
        q = qp.FIFOQueue(8, dtypes, shapes=shapes)
    else:
        q = qp.RandomShuffleQueue(8, 2, dtypes, shapes=shapes, seed=11)
    per_producer = 500
    results = [[] for _ in range(4)]

    def produce(p):
        ids = list(range(p * per_producer, (p + 1) * per_producer))
        position = 0
        while position < len(ids):
            step = 1 + (position % 11)
            chunk = ids[position:position + step]
            if len(chunk) == 1:
                q.enqueue(make_record(chunk[0]))
            else:
                records = [make_record(i) for i in chunk]
                q.enqueue_many(tuple(np.stack(c) if k < 2 else [r[2] for r in records]
                                     for k, c in enumerate(zip(*records))))
            position += step

    def consume(c):
        out, draining, turn = results[c], False, 0
        while True:
            turn += 1
            try:
                if draining:
                    out.extend(zip(*(x.tolist() for x in q.dequeue_up_to(5))))
                elif turn % 3 == 0:
                    out.append(tuple(x.tolist() if hasattr(x, "tolist") else x
                                     for x in q.dequeue()))
                else:
                    out.extend(zip(*(x.tolist() for x in q.dequeue_many(3 + turn % 2))))
            except OutOfRangeError:
                if draining:
                    return
                draining = True

    assert not producers_and_consumers(q, produce, consume, 4, 4)
    got = [record for out in results for record in out]
    assert Counter(r[0] for r in got) == Counter(range(4 * per_producer))
    for i, floats, text in got:
        assert floats == [i, -i] and text == str(i).encode()
    stats = q.stats()
    assert stats["enqueued"] == stats["dequeued"] == 4 * per_producer and stats["size"] == 0


@pytest.mark.parametrize("kind", KINDS)
def test_enqueue_many_larger_than_capacity_goes_in_as_room_appears(kind):
    q = make(kind, 4)
    producer = blocked(q.enqueue_many, [np.arange(10)])
    got = [q.dequeue() for _ in range(10)]
    producer.finish()
    assert producer.error is None
    assert in_order(kind, got, range(10))



def test_a_full_queue_refills_in_chunks_without_starving_a_waiting_dequeue():
    # An enqueue_many waiting for room waits for a sixteenth of the capacity (or all it has
    # left) before it puts more, unless a dequeue waits: then it puts what fits. Here every
    # dequeue waits for more than the refill step leaves room for (the pool of 90 plus 8),
    # so only that rule lets both go on.
    q = qp.RandomShuffleQueue(100, 90, [qp.int64], shapes=[[]], seed=1, name="q")
    chunks = [np.arange(i, i + 64) for i in range(0, 1024, 64)]

    def produce():
        for chunk in chunks:
            q.enqueue_many([chunk])
        q.close()

    producer = Call(produce)
    producer.start()
    got = []
    while True:
        try:
            got += q.dequeue_up_to(8, timeout=30).tolist()
        except OutOfRangeError:
            break
    producer.join(30)
    assert producer.error is None and not producer.is_alive()
    assert Counter(got) == Counter(range(1024))

# -- timeouts --------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_timeouts_raise_deadline_exceeded_and_move_nothing(kind):
    q = make(kind, 3)
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'q': dequeue timed out after"):
        q.dequeue(timeout=0.05)
    q.enqueue_many([[0, 1]])
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'q': dequeue_many timed out"):
        q.dequeue_many(3, timeout=0.05)
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'q': dequeue_up_to timed out"):
        q.dequeue_up_to(3, timeout=0)
    q.enqueue(2)
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'q': enqueue timed out"):
        q.enqueue(3, timeout=0.05)
    with pytest.raises(TimeoutError):  # DeadlineExceededError is also a TimeoutError
        q.dequeue_many(5, timeout=0.05)  # more than capacity: takes 3, then puts them back
    assert q.size() == 3
    assert in_order(kind, q.dequeue_many(3), range(3))


@pytest.mark.parametrize("kind", KINDS)
def test_enqueue_many_timeout_keeps_what_went_in(kind):
    q = make(kind, 3)
    with pytest.raises(DeadlineExceededError, match=r"^Queue 'q': enqueue_many timed out"):
        q.enqueue_many([np.arange(5)], timeout=0.05)
    assert in_order(kind, q.dequeue_many(3), range(3))


# -- abort -----------------------------------------------------------------------------------


class Unpicklable(Exception):
    def __init__(self, *, code):
        super().__init__(f"code {code}")
        self.code = code

    def __reduce_ex__(self, protocol):
        raise TypeError("cannot copy")

    # Uncopyable even once copyreg knows every exception class: tblib, which importing
    # distributed installs (test_shards does), registers them all.
    def __copy__(self):
        raise TypeError("cannot copy")


@pytest.mark.parametrize("kind", KINDS)
def test_abort_drains_then_raises_a_chained_copy(kind):
    q = make(kind, 5)
    q.enqueue_many([[0, 1, 2]])
    cause = DataLossError("corrupt record in shard-3 at offset 12", path="shard-3", offset=12)
    q.abort(cause)
    q.abort(RuntimeError("second"))  # the first abort wins
    assert q.is_closed()
    with pytest.raises(CancelledError):
        q.enqueue(3)
    got = [q.dequeue(), q.dequeue()]
    with pytest.raises(DataLossError, match=r"^corrupt record in shard-3 at offset 12$") as info:
        q.dequeue_many(2)
    error = info.value
    assert error is not cause and error.__cause__ is cause
    assert (error.path, error.offset) == ("shard-3", 12)
    got.append(q.dequeue())  # the failed dequeue_many left the last element
    assert in_order(kind, got, [0, 1, 2])
    with pytest.raises(DataLossError) as info:
        q.dequeue_up_to(2)
    assert info.value.__cause__ is cause


def test_abort_wakes_a_blocked_consumer_with_the_cause():
    q = qp.FIFOQueue(3, [qp.int64], shapes=[[]])
    q.enqueue(0)
    consumer = blocked(q.dequeue_many, 2)
    cause = ValueError("bad input")
    q.abort(cause)
    error = consumer.finish().error
    assert type(error) is ValueError and str(error) == "bad input" and error.__cause__ is cause
    assert q.dequeue() == 0


def test_abort_wakes_a_blocked_producer():
    q = qp.FIFOQueue(1, [qp.int64], shapes=[[]])
    q.enqueue(0)
    producer = blocked(q.enqueue_many, [[1, 2]])
    q.abort(ValueError("bad input"))
    assert isinstance(producer.finish().error, CancelledError)


def test_abort_with_an_uncopyable_exception_raises_the_original():
    q = qp.FIFOQueue(1, [qp.int64])
    cause = Unpicklable(code=3)
    with pytest.raises(TypeError):
        copy.copy(cause)
    q.abort(cause)
    with pytest.raises(Unpicklable) as info:
        q.dequeue()
    assert info.value is cause


# -- the never-started warning ---------------------------------------------------------------


def test_warns_once_when_no_runner_was_started(monkeypatch):
    monkeypatch.setattr(_queue_base, "STARVATION_WARNING_SECS", 0.05)
    q = qp.FIFOQueue(2, [qp.int64], name="q")
    q._runner_added()
    q._runner_added()
    with pytest.warns(RuntimeWarning,
                      match=r"^dequeue on Queue 'q' has waited 0\.05 s, but none of its 2 "
                            r"QueueRunner\(s\) was started: call qp\.start_queue_runners\(\) "
                            r"\(or use `with qp\.running\(\):`\) before dequeuing$"):
        with pytest.raises(DeadlineExceededError):
            q.dequeue(timeout=0.5)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(DeadlineExceededError):
            q.dequeue_many(2, timeout=0.3)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


def test_warning_keeps_waiting_and_the_dequeue_still_succeeds(monkeypatch):
    monkeypatch.setattr(_queue_base, "STARVATION_WARNING_SECS", 0.05)
    q = qp.FIFOQueue(2, [qp.int64], name="q")
    q._runner_added()
    with pytest.warns(RuntimeWarning, match=r"^dequeue on Queue 'q' has waited"):
        consumer = blocked(q.dequeue)
        q.enqueue(4)
        assert consumer.finish().result == 4


@pytest.mark.parametrize("runner", ["started", "none"])
def test_no_warning_when_a_runner_started_or_none_exists(monkeypatch, runner):
    monkeypatch.setattr(_queue_base, "STARVATION_WARNING_SECS", 0.05)
    q = qp.FIFOQueue(2, [qp.int64])
    if runner == "started":
        q._runner_added()
        q._runner_started()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(DeadlineExceededError):
            q.dequeue(timeout=0.3)
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]


# -- PaddingFIFOQueue and PriorityQueue ------------------------------------------------------


def test_padding_queue_pads_each_batch_to_its_longest():
    q = qp.PaddingFIFOQueue(10, [qp.int32, qp.string, qp.float32],
                            shapes=[[None], [None], [2]])
    q.enqueue(([1], [b"a"], [0, 1]))
    q.enqueue(([1, 2, 3], [], [2, 3]))
    q.enqueue(([4, 5], ["bb", "c"], [4, 5]))
    q.enqueue(([6], [b"d"], [6, 7]))
    numbers, strings, fixed = q.dequeue_many(2)
    assert numbers.dtype == np.int32 and numbers.tolist() == [[1, 0, 0], [1, 2, 3]]
    assert strings.dtype == object and strings.tolist() == [[b"a"], [b""]]
    assert fixed.tolist() == [[0, 1], [2, 3]]
    numbers, strings, _ = q.dequeue_many(1)
    assert numbers.tolist() == [[4, 5]] and strings.tolist() == [[b"bb", b"c"]]
    numbers, strings, _ = q.dequeue()  # a single element is not padded
    assert numbers.tolist() == [6] and strings.tolist() == [b"d"]


def test_padding_queue_checks_known_dims_and_rank():
    q = qp.PaddingFIFOQueue(3, [qp.int64], shapes=[[None, 2]], name="q")
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected shape \[\?, 2\], got shape \[3\] "
                             r"\(Shape mismatch in tuple component 0\. Expected \[\?,2\], "
                             r"got \[3\]\)$"):
        q.enqueue(np.array([1, 2, 3]))
    with pytest.raises(InvalidArgumentError,
                       match=r"^Queue 'q' component 0: expected dtype int64, got an array of "
                             r"dtype float64 and shape \[2, 4, 2\] "):
        q.enqueue_many([np.zeros((2, 4, 2))])
    q.enqueue_many([np.zeros((2, 4, 2), dtype=np.int64)])
    assert q.dequeue_many(2).shape == (2, 4, 2)


def test_priority_queue_lowest_first_and_ties_fifo():
    q = qp.PriorityQueue(10, [qp.string], shapes=[[]])
    q.enqueue((3, b"c1"))
    q.enqueue_many(([1, 2, 1], [b"a1", b"b1", b"a2"]))
    q.enqueue((3, b"c2"))
    q.enqueue((1, b"a3"))
    assert q.dequeue() == (1, b"a1")
    priorities, values = q.dequeue_many(4)
    assert priorities.tolist() == [1, 1, 2, 3]
    assert values.tolist() == [b"a2", b"a3", b"b1", b"c1"]
    assert q.dequeue() == (3, b"c2")


@pytest.mark.parametrize("shapes", [None, [], ()])
def test_a_priority_queue_may_hold_the_priority_alone(shapes):
    q = qp.PriorityQueue(10, [], shapes=shapes)
    q.enqueue_many(([3, 1, 2],))
    q.enqueue((0,))
    assert q.dequeue() == 0 and q.dequeue_many(3).tolist() == [1, 2, 3]


def test_priority_queue_put_back_keeps_tie_order():
    q = qp.PriorityQueue(10, [qp.int64], shapes=[[]])
    q.enqueue_many(([5, 5, 5], [0, 1, 2]))
    q.close()
    with pytest.raises(OutOfRangeError):
        q.dequeue_many(4)
    assert q.dequeue_up_to(4)[1].tolist() == [0, 1, 2]


def test_stats_count_elements_and_waiting():
    q = qp.FIFOQueue(1, [qp.int64], shapes=[[]])
    consumer = blocked(q.dequeue)
    q.enqueue(1)
    consumer.finish()
    q.enqueue(2)
    producer = blocked(q.enqueue, 3)
    q.dequeue()
    producer.finish()
    stats = q.stats()
    assert {k: stats[k] for k in ("enqueued", "dequeued", "size", "capacity")} == {
        "enqueued": 3, "dequeued": 2, "size": 1, "capacity": 1}
    assert stats["consumer_wait_secs"] > 0 and stats["producer_wait_secs"] > 0


@pytest.mark.parametrize("n", [-2, 1.0, True])
def test_batch_size_must_be_a_non_negative_int(n):
    q = qp.FIFOQueue(3, [qp.int64])
    with pytest.raises(InvalidArgumentError,
                       match=rf"^dequeue_many: n must be a non-negative int, "
                             rf"got {re.escape(repr(n))}$"):
        q.dequeue_many(n)


@pytest.mark.parametrize("op", ["dequeue_many", "dequeue_up_to"])
def test_dequeuing_zero_elements_gives_an_empty_batch_when_shapes_are_known(op):
    # TF's fifo_queue_test: an empty [0, ...] batch at once, from an empty queue too
    q = qp.FIFOQueue(3, [qp.int64, qp.float32], shapes=[[], [2]])
    ids, rows = getattr(q, op)(0)
    assert (ids.shape, ids.dtype, rows.shape, rows.dtype) == ((0,), np.int64, (0, 2), np.float32)
    unknown = qp.FIFOQueue(3, [qp.int64])
    with pytest.raises(InvalidArgumentError, match=rf"{op}\(0\): Dequeue operations require "
                                                   rf"the components to have specified shapes"):
        getattr(unknown, op)(0)


# -- a model check ---------------------------------------------------------------------------

operations = st.lists(
    st.tuples(st.sampled_from(["enqueue_many", "dequeue_many", "dequeue_up_to"]),
              st.integers(1, 12)),
    max_size=40)


@settings(max_examples=60)
@given(operations)
def test_fifo_matches_a_list_model(ops):
    """Non-blocking (timeout=0) enqueue_many/dequeue_many on FIFO behave like a Python list,
    including partial enqueue_many on timeout, across ring wrap-around."""
    capacity = 8
    q = qp.FIFOQueue(capacity, [qp.int64, qp.float64, qp.string], shapes=[[], [2], []])
    model, counter = [], 0
    for op, k in ops:
        if op == "enqueue_many":
            ids = np.arange(counter, counter + k)
            counter += k
            room = capacity - len(model)
            try:
                q.enqueue_many((ids, np.stack([ids, ids * 0.5], axis=1),
                                [str(i).encode() for i in ids]), timeout=0)
                assert k <= room
            except DeadlineExceededError:
                assert k > room
            model.extend(ids[:room].tolist())
        else:
            try:
                ids, floats, strings = getattr(q, op)(k, timeout=0)
            except DeadlineExceededError:
                assert len(model) < k
                continue
            assert ids.tolist() == model[:k]
            assert floats.tolist() == [[i, i * 0.5] for i in model[:k]]
            assert strings.tolist() == [str(i).encode() for i in model[:k]]
            del model[:k]
        assert q.size() == len(model)
    q.close()
    rest = q.dequeue_up_to(capacity)[0].tolist() if model else []
    assert rest == model


@settings(max_examples=60)
@given(operations, st.integers(0, 5))
def test_shuffle_queue_matches_a_multiset_model(ops, min_after):
    """Non-blocking operations on a RandomShuffleQueue hold the model's multiset, and each
    element's components stay together however its row is reused."""
    capacity = 8
    q = qp.RandomShuffleQueue(capacity, min_after, [qp.int64, qp.float64, qp.string],
                              shapes=[[], [2], []], seed=0)
    model, counter = Counter(), 0

    def check(ids, floats, strings):
        assert floats.tolist() == [[i, i * 0.5] for i in ids.tolist()]
        assert strings.tolist() == [str(i).encode() for i in ids.tolist()]
        model.subtract(ids.tolist())
        assert min(model.values(), default=0) >= 0

    for op, k in ops:
        if op == "enqueue_many":
            ids = np.arange(counter, counter + k)
            counter += k
            room = capacity - sum(model.values())
            try:
                q.enqueue_many((ids, np.stack([ids, ids * 0.5], axis=1),
                                [str(i).encode() for i in ids]), timeout=0)
            except DeadlineExceededError:
                assert k > room
            model.update(ids[:room].tolist())
        elif op == "dequeue_many" and k == 1:
            try:
                check(*[np.array([v]) for v in q.dequeue(timeout=0)])
            except DeadlineExceededError:
                assert sum(model.values()) <= min_after
        else:
            try:
                check(*getattr(q, op)(k, timeout=0))
            except DeadlineExceededError:
                assert sum(model.values()) < k + min_after
        assert q.size() == sum(model.values())
    q.close()
    while sum(model.values()):
        check(*q.dequeue_up_to(3))
    assert q.size() == 0


@pytest.mark.parametrize("kind", KINDS)
def test_blocked_dequeues_that_need_different_sizes_each_wake_when_theirs_is_there(kind):
    q = make(kind, 10)
    many = blocked(q.dequeue_many, 3)
    one = blocked(q.dequeue)
    q.enqueue(1)  # enough for the dequeue, not for the dequeue_many
    assert int(one.finish().result) == 1
    many.join(0.1)
    assert many.is_alive()
    q.enqueue(2)
    many.join(0.1)
    assert many.is_alive()
    q.enqueue_many(np.array([3, 4], dtype=np.int64))
    assert in_order(kind, many.finish().result, [2, 3, 4])
    assert q.size() == 0


# -- storage grows as elements arrive --------------------------------------------------------


@pytest.mark.parametrize("make", [
    lambda: qp.FIFOQueue(10**8, [qp.float64, qp.int64], shapes=[[], [3]]),
    lambda: qp.RandomShuffleQueue(10**8, 10, [qp.float64, qp.int64], shapes=[[], [3]], seed=0),
    lambda: qp.PriorityQueue(10**8, [qp.float64], shapes=[[]]),
])
def test_a_huge_capacity_costs_nothing_before_it_is_used(make):
    tracemalloc.start()
    try:
        q = make()
        q.enqueue_many(tuple(np.zeros((4,) + s, dtype) if dtype != np.int64 or s else
                             np.arange(4) for dtype, s in zip(q.dtypes, q.shapes)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert q.size() == 4 and peak < (1 << 20), f"{peak} bytes for 4 elements"


def test_a_fifo_keeps_its_order_while_it_grows_wrapped_around():
    q = qp.FIFOQueue(5000, [qp.int64], shapes=[[]])
    q.enqueue_many([np.arange(1000)])
    assert q.dequeue_many(600).tolist() == list(range(600))  # the ring's head moved
    q.enqueue_many([np.arange(1000, 2000)])  # wraps around the first columns, then grows
    for i in range(2000, 2300):
        q.enqueue(i)
    assert q.dequeue_many(q.size()).tolist() == list(range(600, 2300))


def test_shuffle_and_priority_queues_keep_every_element_while_they_grow():
    shuffle = qp.RandomShuffleQueue(6000, 0, [qp.int64], shapes=[[]], seed=3)
    priority = qp.PriorityQueue(6000, [qp.int64], shapes=[[]])
    for start in range(0, 5000, 700):
        stop = min(start + 700, 5000)
        shuffle.enqueue_many([np.arange(start, stop)])
        priority.enqueue_many([np.arange(stop, start, -1), np.arange(start, stop)])
        shuffle.enqueue(-start - 1)
    assert Counter(shuffle.dequeue_many(shuffle.size()).tolist()) == Counter(
        list(range(5000)) + [-s - 1 for s in range(0, 5000, 700)])
    priorities, values = priority.dequeue_many(5000)
    assert priorities.tolist() == list(range(1, 5001))


# -- SparseValue components ------------------------------------------------------------------


def sv(*values):
    return qp.SparseValue([[j] for j in range(len(values))], list(values), [len(values)])


@pytest.mark.parametrize("make", [
    lambda: qp.FIFOQueue(10, [qp.int64, qp.int64]),
    lambda: qp.FIFOQueue(10, [qp.int64, qp.int64], shapes=[[], None]),
    lambda: qp.PaddingFIFOQueue(10, [qp.int64, qp.int64], shapes=[[], [None]]),
    lambda: qp.FIFOQueue(10),
])
def test_a_queue_holds_sparse_components_and_batches_them(make):
    q = make()
    q.enqueue((0, sv(5, 6)))
    q.enqueue_many(([1, 2], qp.SparseValue([[0, 0], [1, 0], [1, 1]], [7, 8, 9], [2, 2])))
    first = q.dequeue()
    assert first[0] == 0 and first[1].values.tolist() == [5, 6]
    assert first[1].dense_shape.tolist() == [2]
    q.close()
    with pytest.raises(OutOfRangeError):
        q.dequeue_many(3)  # fails, leaving both elements in order
    counts, batch = q.dequeue_up_to(3)
    assert counts.tolist() == [1, 2]
    assert batch.indices.tolist() == [[0, 0], [1, 0], [1, 1]]
    assert batch.values.tolist() == [7, 8, 9] and batch.dense_shape.tolist() == [2, 2]


def test_a_shuffle_queue_keeps_each_sparse_value_with_its_element():
    q = qp.RandomShuffleQueue(50, 0, [qp.int64, qp.int64], seed=2)
    for i in range(30):
        q.enqueue((i, sv(*range(i % 4))))
    counts, batch = q.dequeue_many(30)
    rows = qp.sparse.split(batch, "test")
    assert sorted(counts.tolist()) == list(range(30))
    assert all(row.values.tolist() == list(range(c % 4)) for c, row in zip(counts, rows))


def test_string_sparse_values_as_parsed_take_the_generated_fast_path():
    # A VarLenFeature of strings parses to a SparseValue of an object array of bytes; the
    # generated accept functions take it as convert() would, where they once gave up for
    # the whole element (a wide schema's per-record pattern: 1.1-1.3 ms a record).
    q = qp.FIFOQueue(8, [qp.int64, qp.string], shapes=[[], None], names=["n", "words"])
    words = qp.SparseValue(np.array([[0], [1]]), np.array([b"a", b"bc"], dtype=object),
                           np.array([2]))
    q.enqueue({"n": np.int64(1), "words": words})  # the first fixes the kind and the rank
    element = {"n": np.int64(2), "words": words}
    accepted, owned = q._spec.accept(element), q._spec.accept_owned(element)
    assert accepted is not None and owned is not None
    assert accepted[1] is words and owned[1].values is not words.values  # kept / copied
    q.enqueue(element)
    batch = q.dequeue_many(2)
    assert batch["words"].values.tolist() == [b"a", b"bc"] * 2
    assert batch["words"].indices.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]


def test_a_component_keeps_the_kind_of_its_first_value():
    q = qp.FIFOQueue(4, [qp.int64])
    q.enqueue(np.array([1, 2]))
    with pytest.raises(InvalidArgumentError, match=r"component 0 holds dense values: got a "
                                                   r"SparseValue"):
        q.enqueue(sv(1))
    fixed = qp.FIFOQueue(4, [qp.int64], shapes=[[2]])
    with pytest.raises(InvalidArgumentError, match=r"holds dense values of a fixed shape"):
        fixed.enqueue(sv(1, 2))


def test_enqueue_many_of_empty_lists_converts_them_as_tf_does():
    q = qp.FIFOQueue(3, [qp.int32, qp.float32])
    q.enqueue_many(([], []))  # NumPy reads [] as float64: nothing is converted, so it fits
    assert q.size() == 0
    with pytest.raises(InvalidArgumentError, match=r"expected dtype int32"):
        q.enqueue_many((np.zeros(0, np.float64), []))  # an array keeps its dtype's rules


def test_staging_rows_of_fixed_shape_keeps_the_gil():
    # NumPy's copy of more than 500 items lets go of the GIL; two runner threads staging a
    # 784-byte image each then handed the GIL to each other on every element
    q = qp.RandomShuffleQueue(10, 0, [qp.uint8, qp.int64], shapes=[[784], []],
                              names=["image", "label"])
    element = {"image": np.zeros(784, np.uint8), "label": np.int64(3)}
    overlapped = runs_beside(lambda: [q._spec.staged(element) for _ in range(20_000)])
    assert overlapped == [False] * 5, overlapped


def put_group(q, staged):
    """Puts the ``staged`` elements as a batching runner's group (a stage of its own)."""
    stage = q._add_stage()
    stage.extend(staged)
    q._put_staged(stage)
    with q._lock:
        q._stages.remove(stage)


def test_putting_groups_of_staged_token_lists_keeps_the_gil():
    # a group of token lists is a few thousand values: stack's check of their indices and
    # the copy to the arena's end took NumPy calls that let go of the GIL, a hand-over to
    # another runner thread or the consumer each (who then keeps it until its own next
    # release). Room is made first (rows and arena grown, then emptied): 5 attempts of 100
    # groups fit without a growth or a compaction, whose larger copies may let go.
    rng = np.random.default_rng(0)
    elements = [(np.int64(i), sv(*rng.integers(0, 1000, int(n))))
                for i, n in enumerate(rng.integers(50, 150, 48))]
    q = qp.FIFOQueue(5 * 100 * len(elements), [qp.int64, qp.int64], shapes=[[], None])
    staged = [q._spec.staged(element) for element in elements]

    def put_groups():
        for _ in range(100):
            put_group(q, staged)

    for _ in range(5):
        put_groups()
    q.dequeue_many(q.size())
    overlapped = runs_beside(put_groups)
    assert overlapped == [False] * 5, overlapped
    labels, tokens = q.dequeue_many(len(elements))
    assert labels.tolist() == list(range(len(elements)))
    assert tokens.values.tolist() == [v for _, element in elements for v in element.values]


def test_scattering_and_gathering_rows_of_fixed_shape_keeps_the_gil(monkeypatch):
    # the shuffle queue writes a group's rows to free rows spread over its column and reads
    # a batch from rows spread over it: NumPy's fancy indexing and take of a 2-D array let
    # go of the GIL, a hand-over per group and per batch between the runner threads and the
    # consumer. (Its draw, Generator.choice, still lets go once a batch: left out here.)
    q = qp.RandomShuffleQueue(5000, 0, [qp.uint8, qp.int64], shapes=[[784], []],
                              names=["image", "label"], seed=0)
    monkeypatch.setattr(q, "_shuffle_in", lambda k: setattr(q, "_appended", q._appended - k))
    images = np.arange(48 * 784, dtype=np.int64).reshape(48, 784).astype(np.uint8)
    group = [{"image": image, "label": np.int64(i)} for i, image in enumerate(images)]
    staged = [q._spec.staged(element) for element in group]
    batches = []

    def put_and_take():
        for _ in range(20):
            put_group(q, staged)
            batches.append(q.dequeue_many(48))

    put_and_take()  # rows allocated
    overlapped = runs_beside(put_and_take)
    assert overlapped == [False] * 5, overlapped
    for batch in batches:
        assert batch["image"].tolist() == images[batch["label"]].tolist()
        assert sorted(batch["label"].tolist()) == list(range(48))


@pytest.mark.parametrize("staged", [1, 3])
def test_staged_rows_go_in_whole_alone_or_in_groups(staged):
    q = qp.FIFOQueue(10, [qp.uint8, qp.float32], shapes=[[784], [2, 2]])
    stage = q._add_stage()
    rows = [(np.full(784, i, np.uint8), np.full((2, 2), i / 2, np.float32)) for i in range(staged)]
    for image, box in rows:
        stage.append(q._spec.staged((image, box)))
        image[:] = 99  # a producer reusing its arrays changes nothing staged
        box[:] = 99
    q._put_staged(stage)
    images, boxes = q.dequeue_many(staged)
    assert images.tolist() == [[i] * 784 for i in range(staged)]
    assert boxes.tolist() == [[[i / 2] * 2] * 2 for i in range(staged)]


def test_components_of_zero_size_rows_go_through_every_queue():
    # A [0]-shaped component (TF takes one): the columns' memoryview copy cannot cast a
    # zero-size array, and enqueue_many raised TypeError.
    for q in (qp.FIFOQueue(8, [qp.float32, qp.int64], shapes=[[0], []]),
              qp.RandomShuffleQueue(8, 0, [qp.float32, qp.int64], shapes=[[0], []], seed=0),
              qp.PaddingFIFOQueue(8, [qp.float32, qp.int64], shapes=[[0], []])):
        q.enqueue_many([np.zeros((3, 0), np.float32), np.arange(3)])
        q.enqueue([np.zeros(0, np.float32), 3])
        empty, labels = q.dequeue_many(4)
        assert empty.shape == (4, 0) and empty.dtype == np.float32
        assert sorted(labels.tolist()) == [0, 1, 2, 3]
