"""``read_batch_features``: parsed batches from record files in one call, repeatable and
resumable.

The pipeline runs on a :class:`~queuepipe.plan.ReadPlan`, which numbers the input's chunks
of records (tickets) and its records (ordinals) by the files and the seed alone. As in TF's
``read_batch_features``, the queue holds the serialized records, and each batch drawn from it
is parsed as one (``parse_example``): a record is parsed once, in the batch it leaves in, and
the queue stores and shuffles one string per record, whatever the schema::

    ReadPlan ----> thread 1: take ticket 0 -+                      +--> draw a batch, parse it
      (files,      thread 2: take ticket 1 -+--> enqueue_many --> queue    (the enqueue threads,
       seed)       thread 3: take ticket 2 -+    (seeded: in ticket order)  ahead of the consumer)
                                                                     --> Batches (ordinals
                                                                           stripped)

The enqueue threads draw the batches a ``dequeue_many`` would take next and parse them
outside the queue's lock (``QueueBase._draw_ahead``), where the compiled core's walk runs
without the GIL; the consumer, the training loop, picks each one up. With a ``parse_fn``,
that function parses each chunk as it is read instead, and the queue holds its rows; so
does ``parse_example`` for FixedLenFeatures of records of 16 KB or more
(:func:`_parsed_before`).

Each record carries its ordinal through the queue in a hidden column. The consumer side
strips it and tells the plan which records were delivered, so that a state lists exactly
the records read and not delivered yet: the records in the queue (in the queue's order, with
its generator's state) and those between reading and the queue.

With a ``seed``, chunks are enqueued in ticket order (a thread whose chunk is parsed early
parks it and goes on; the thread whose chunk is next runs the parked ones) into a shuffle
queue that draws each batch from the first elements in arrival order: the batches are then
a function of the seed and the files, whatever the number of threads and their timing.
Without one they enqueue as they finish.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, cast

import numpy as np

from queuepipe.batching import Batches, _batching, _positive_int, _scope, _Structure, \
    sequence_of
from queuepipe._frames import _LENGTH, FRAME_BYTES, HEADER_BYTES
from queuepipe.errors import CancelledError, InvalidArgumentError, NotFoundError, \
    QueuePipeError
from queuepipe.parsing import FixedLenFeature, VarLenFeature, parse_example
from queuepipe.parsing._example import parse_example_batches
from queuepipe.parsing._walkers import core_available
from queuepipe.plan import REFUSED, ReadPlan, pack_ints, reader_of, unpack_ints
from queuepipe.producers import _check_num_epochs, match_filenames_once
from queuepipe.readers import TFRecordReader
from queuepipe.runner import END_LOOKALIKES, not_an_end
from queuepipe.shards import indexed_count
from queuepipe.sparse import SparseValue

__all__ = ["read_batch_features", "SHUFFLES"]

SHUFFLES = ("buffer", "global")

# The hidden column of a queued dict that carries each row's ordinal through the queue.
ORDINAL = "__queuepipe_ordinal__"
# The queue's column of serialized records (without a parse_fn).
SERIALIZED = "__queuepipe_serialized__"

# How far apart, in ordinals, the records a state leaves open may lie, per record it can
# leave open (the marks the plan allocates for a loaded state). A shuffle queue keeps an
# element through k draws of n from a pool of p with probability (1 - n/p)**k < exp(-k/p):
# to stay while 64 pools' worth of records were read, about exp(-64) = 1.6e-28.
_SPAN_PER_HELD = 64

# Chunks' worth of batches the enqueue threads draw and finish (parse) ahead of the consumer
# (QueueBase._draw_ahead): the consumer, the training loop, then only picks each one up, and
# the drawing and parsing run in the threads, beside each other. With one chunk's worth, an
# enqueue often found batches of the chunk before still waiting, drew fewer than its chunk
# brought, and the consumer drew and parsed the rest itself (tokens, 120,000 records, chunks
# of 512, batches of 128, 4 drawn ahead: 122-127 batches of 938 parsed by the consumer, 79
# with 8). Two enqueue threads run faster than one only when each draws and parses as many
# batches in a call as its chunk brought (tokens, chunks of 2,048: 1.2-1.4x one thread with
# all 16 of a chunk's batches drawn in a call, none with 8: docs/performance.md). So each
# enqueue thread has its two chunks' worth: with two threads sharing two chunks' worth, the
# batches drawn often reached the limit while a thread's chunk went in, its batches were
# left undrawn, and the consumer drew and parsed them itself, holding the queue's lock
# (tokens, 2 threads, 240,000 records: 648-656 batches of 1,875 parsed by the consumer, 79
# with each thread's own two chunks' worth; 547k -> 711k records/s, medians of 4).
_CHUNKS_DRAWN_AHEAD = 2

# Records this long or longer on average (the first file's first _PROBED_RECORDS, by their
# headers: _probed_length) are parsed a chunk at a time before the queue, as a parse_fn would
# parse them: see _parsed_before.
_PARSED_BEFORE_BYTES = 16 << 10
_PROBED_RECORDS = 8

# read_batch_features' default chunk (see _default_read_batch_size): records of about
# _CHUNK_BYTES in all, between _CHUNK_RECORDS (the records' length unknown, or long) and
# _MOST_CHUNK_RECORDS, where the compiled core parses. Each chunk costs its enqueue thread a
# read, a put, a draw and a few parse calls, and the consumer a wake-up, whatever its size:
# chunks of 2,048 records against 512, one enqueue thread, cost 0.74x the CPU a record on
# float, 0.84x on tokens, 0.87x on wide and as much on mnist (6 interleaved rounds each;
# instructions 0.85x, 0.78x, 0.92x and 0.87x), and two threads ran tokens at 836k against
# 684k records/s (medians of 4).
_CHUNK_BYTES = 8 << 20
_CHUNK_RECORDS = 512
_MOST_CHUNK_RECORDS = 2048


def _drawn_ahead(read_batch_size: int, batch_size: int, threads: int) -> int:
    """The batches drawn ahead of the consumer: two chunks' worth per enqueue thread, at
    least 2."""
    return max(2, _CHUNKS_DRAWN_AHEAD * threads * -(-read_batch_size // batch_size))

# Longest single wait for a turn, so that a stopped pipeline's threads notice promptly.
_TURN_SLICE_SECS = 0.1

# Batches whose records the consumer reports delivered together, in one call of the plan's
# (its lock, the records' ordinals as an array, the core's marks: 3-5 us a batch holding the
# GIL, a third of what the training loop's thread spent on a batch drawn ahead). A state
# reports those kept first.
_DELIVERED_TOGETHER = 8


class _PartlyParsed(Exception):
    """A chunk parsed before the queue holds a record that does not parse: ``element`` is
    the records before it, parsed and tagged (None if none), ``error`` the error naming it."""

    def __init__(self, element: Any, error: InvalidArgumentError) -> None:
        super().__init__(str(error))
        self.element, self.error = element, error


class _Tagged(_Structure):
    """The elements' structure with each row's ordinal added (a dict key, or a last
    component), taken off again as batches come out and reported as delivered."""

    def __init__(self, delivered: Callable[[np.ndarray], None]) -> None:
        super().__init__()
        self._delivered = delivered
        # The ordinals of each batch restored and not yet known to have reached its caller,
        # by the consumer's thread.
        self._handed: Dict[int, np.ndarray] = {}
        # Those of batches that reached their callers, not yet reported delivered (fewer
        # than _DELIVERED_TOGETHER batches' unless a report was cut short), and the lock
        # of their reports.
        self._reached: List[np.ndarray] = []
        self._reporting = threading.Lock()
        self._user: Optional[type] = None  # dict, tuple, list, or object for a bare value

    def tag(self, element: Any, ordinals: np.ndarray) -> Any:
        if self._user is None:
            self._user = dict if isinstance(element, Mapping) else \
                type(element) if isinstance(element, (tuple, list)) \
                and not isinstance(element, SparseValue) else object
        if self._user is dict:
            return {**element, ORDINAL: ordinals}
        if self._user is object:
            return (element, ordinals)
        return (*element, ordinals)

    def restore(self, batch: Any) -> Any:
        if self._user is dict:
            batch = dict(batch)
            ordinals = batch.pop(ORDINAL)
        else:
            *batch, ordinals = batch
            batch = batch[0] if self._user is object else sequence_of(cast(type, self._user),
                                                                      batch)
        self._handed[threading.get_ident()] = ordinals
        return batch

    def commit(self, now: bool = True) -> None:
        """The batches restored have reached their callers: their records are delivered,
        reported to the plan at once with ``now``, else once ``_DELIVERED_TOGETHER``
        batches' are. Whole whatever instant a Ctrl-C lands (marking again is harmless: a
        batch's ordinals leave ``_handed`` once in ``_reached``, and those leave it once
        reported)."""
        for ident, ordinals in list(self._handed.items()):
            self._reached.append(ordinals)
            self._handed.pop(ident, None)
        if len(self._reached) < (1 if now else _DELIVERED_TOGETHER):
            return
        with self._reporting:  # (two consumer threads: each reports what it took)
            k = len(self._reached)
            if k:
                reached = self._reached[:k]
                self._delivered(reached[0] if k == 1 else np.concatenate(reached))
                del self._reached[:k]  # (appended meanwhile: after these)

    def withhold(self) -> None:
        """The batch this thread restored last never reached its caller."""
        self._handed.pop(threading.get_ident(), None)


class _Turns:
    """Ticket order for the enqueues of a seeded pipeline, without idle waits.

    A thread whose chunk is parsed before its turn parks the chunk's enqueue and goes on to
    the next chunk; the thread that parks the ticket next in line runs it and every parked
    one after it, in ticket order. Parked chunks are bounded (``limit``): past it, a thread
    waits for its turn. (Waiting for every turn cost up to a third of the steady rate with
    two threads on a busy host, where a preempted turn holder stalls the other thread.)
    """

    def __init__(self, first: int, queue: Any, limit: int) -> None:
        self._next = first
        self._queue = queue
        self._limit = limit
        self._parked: Dict[int, Callable[[], None]] = {}
        self._draining = False  # a thread runs the parked enqueues
        self._changed = threading.Condition()

    def _wait(self, until: Callable[[], bool]) -> None:
        """Waits, lock held, until ``until()``.

        Raises:
          CancelledError: the queue closed first (the pipeline stops).
        """
        while not until():
            if self._queue.is_closed():
                raise CancelledError(f"Queue '{self._queue.name}' is closed.")
            self._changed.wait(_TURN_SLICE_SECS)

    def wait_past(self, ticket: int) -> None:
        """Waits until the tickets before ``ticket`` are enqueued (unseeded: the saved
        records)."""
        with self._changed:
            self._wait(lambda: self._next >= ticket)

    def put(self, ticket: int, enqueue: Callable[[], None]) -> None:
        """Enqueues ``ticket``'s chunk in its turn: now, parked for later, or after the
        parked ones before it."""
        with self._changed:
            self._wait(lambda: ticket == self._next or len(self._parked) < self._limit)
            self._parked[ticket] = enqueue
            if self._draining:
                return
            self._draining = True
        # The drainer stops draining in the same locked step in which it finds the next
        # ticket missing: a thread that parks that ticket after this check sees no drainer
        # and drains itself. (Clearing the flag in a later step let a thread park the next
        # ticket, see the flag still set and leave it parked: with the parked chunks at their
        # limit, every thread then waited for a turn nobody would run.)
        try:
            while True:
                with self._changed:
                    if self._next not in self._parked:
                        self._draining = False
                        self._changed.notify_all()
                        return
                    ready = self._parked.pop(self._next)
                ready()  # outside the lock: it may wait for room
                with self._changed:
                    self._next += 1
                    self._changed.notify_all()
        except BaseException:
            with self._changed:
                self._draining = False
                self._changed.notify_all()
            raise


class _Planned:
    """The state keeper and producer side of one read_batch_features pipeline."""

    def __init__(self, plan: ReadPlan, features: Mapping[str, Any],
                 parse_fn: Optional[Callable[[np.ndarray], Any]], ordered: bool, threads: int,
                 capacity: int, batch_size: int, parse_before: bool = False) -> None:
        self.plan = plan
        self._features = features
        self._parse_fn = parse_fn
        # Without a parse_fn: parse each chunk before the queue (long records), not each
        # batch drawn from it.
        self._parse_before = parse_before
        self._ordered = ordered
        self._threads = threads
        # The most records a state's queue can hold: its capacity, and what a dequeue
        # interrupted midway (Ctrl-C) put back.
        self._most_held = capacity + batch_size
        # The records a state can leave open: those in the queue, and in flight (a chunk per
        # thread, parked chunks, the batch being taken), each group of open chunks spread
        # over at most _SPAN_PER_HELD times as many ordinals by the shuffle.
        self._max_span = _SPAN_PER_HELD * (capacity + batch_size +
                                           (3 * threads + 1) * plan.loaded_chunk_size)
        self.structure = _Tagged(plan.delivered)
        self._queue: Any = None
        self._turns: Optional[_Turns] = None
        self._first_ticket = 0
        self._resume: Optional[Tuple[List[Tuple[int, List[int], np.ndarray]], np.ndarray,
                                     Optional[Dict[str, Any]]]] = None
        self._loaded: Dict[str, Any] = {}  # the state loaded, while its records wait
        self._lock = threading.Lock()

    def make_op(self, producer: Any, queue: Any, structure: Any) -> Callable[[], None]:
        del producer, structure
        self._queue = queue
        return self._op

    def _element(self, values: np.ndarray, ordinals: np.ndarray) -> Any:
        """A chunk's records (an object array of ``bytes``) as the queue takes them, with
        their ordinals: serialized, parsed (long records), or parsed by the ``parse_fn``."""
        if self._parse_fn is None:
            if self._parse_before:
                return self._parsed_chunk(values, ordinals)
            return self.structure.tag({SERIALIZED: values}, ordinals)
        try:
            element = self._parse_fn(values)
        except END_LOOKALIKES as e:  # an error, never an end (nor a seeded chunk's hang)
            raise not_an_end(e, f"parse_fn of queue '{self._queue.name}'") from e
        return self.structure.tag(element, ordinals)

    def parse(self, batches: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
        """Batches of serialized records drawn from the queue, parsed: each as TF's
        ``read_batch_features`` parses it (a ``VarLenFeature``'s dense_shape is the batch's
        longest list), batches of one size in one call. A record that does not parse fails
        its call: a lone batch's error names it by its key (``b"<file>:<offset>"``, read
        again for the message only); several batches' (those drawn ahead) are drawn and
        parsed again by the consumer, alone."""
        if len(batches) == 1:
            parsed = [self._parse_one(batches[0][SERIALIZED], batches[0][ORDINAL])]
        else:  # drawn ahead together, of one size (a list: no object array made)
            records = batches[0][SERIALIZED].tolist()
            for batch in batches[1:]:
                records += batch[SERIALIZED].tolist()
            parsed = parse_example_batches(records, self._features, len(batches[0][SERIALIZED]))
        for batch, out in zip(batches, parsed):
            out[ORDINAL] = batch[ORDINAL]
        return parsed

    def _parsed_chunk(self, values: np.ndarray, ordinals: np.ndarray) -> Any:
        """A chunk parsed before the queue (long records), tagged.

        Raises:
          _PartlyParsed: a record does not parse; it carries the records before it, parsed,
            for the caller to enqueue before it raises the error, which names the record by
            its key and its place in the chunk (the chunk's other records are not read
            again, as a batch parsed after the queue loses its own).
        """
        try:
            return self.structure.tag(parse_example(values, self._features), ordinals)
        except InvalidArgumentError:
            pass
        bad = 0  # the first record that does not parse alone (error path only)
        while bad < len(values) and self._parses(values[bad:bad + 1]):
            bad += 1
        good = None
        if 0 < bad < len(values):
            good = self.structure.tag(parse_example(values[:bad], self._features),
                                      ordinals[:bad])
        try:
            parsed = self._parse_one(values, ordinals)  # (again, to name the record)
        except InvalidArgumentError as error:
            raise _PartlyParsed(good, error) from None
        return self.structure.tag(parsed, ordinals)

    def _parses(self, records: np.ndarray) -> bool:
        try:
            parse_example(records, self._features)
        except InvalidArgumentError:
            return False
        return True

    def _parse_one(self, records: np.ndarray, ordinals: np.ndarray) -> Dict[str, Any]:
        try:
            return parse_example(records, self._features)
        except InvalidArgumentError as e:
            error = e
        try:
            keys = self.plan.keys_of(ordinals)
        except (OSError, QueuePipeError):  # the files changed since: the parse's error stands
            keys = None
        if keys is None:
            raise error
        return parse_example(records, self._features, example_names=keys)

    def _op(self) -> None:
        """One step of an enqueue thread: the saved records first (once), then a chunk."""
        with self._lock:
            if self._turns is None:
                self._turns = _Turns(self._first_ticket - (self._resume is not None),
                                     self._queue, limit=2 * self._threads)
            resume, self._resume = self._resume, None
        if resume is not None:
            self._run_turn(self._first_ticket - 1, lambda: self._put_back(*resume))
            return
        chunk = self.plan.take()
        try:
            element = self._element(chunk.values, chunk.ordinals)
        except _PartlyParsed as partly:
            # In its turn, after the chunks before it: the records before the bad one, then
            # the error (raised by whichever thread runs the turn, which fails the pipeline).
            def enqueue_and_fail(partly: _PartlyParsed = partly) -> None:
                if partly.element is not None:
                    self._queue.enqueue_many(partly.element)
                raise partly.error

            self._run_turn(chunk.ticket, enqueue_and_fail)
            return
        self._run_turn(chunk.ticket, lambda: self._queue.enqueue_many(element))

    def _run_turn(self, ticket: int, enqueue: Callable[[], None]) -> None:
        turns = self._turns
        assert turns is not None
        if not self._ordered and ticket >= self._first_ticket:
            turns.wait_past(self._first_ticket)  # after the saved records, if any
            enqueue()
            return
        turns.put(ticket, enqueue)

    # -- the state --------------------------------------------------------------------------

    def state_dict(self) -> Dict[str, Any]:
        with self._lock:
            if self._resume is not None:  # loaded, not started: still the loaded state
                return self._loaded
        queue = self._queue.built if self._queue is not None else None
        held: Any = None
        if queue is not None:  # first the queue, then the plan: see the module docstring
            names = queue.names
            column = names.index(ORDINAL) if names else len(queue.dtypes) - 1
            ordinals, order = queue._snapshot(column)
            held = {"ordinals": pack_ints(ordinals), "order": order}
        return {"plan": self.plan.state(), "queue": held}

    def load_state_dict(self, state: Dict[str, Any]) -> None:
        """Takes up ``state`` once it is checked against the pipeline: its queue part here
        (at most the queue's capacity, each record once), its plan by the plan.

        Raises:
          InvalidArgumentError: the state fails a check (the message names what).
        """
        if not isinstance(state, dict) or "plan" not in state:
            raise InvalidArgumentError(f"not a state of read_batch_features: "
                                       f"{str(state)[:80]!r}")
        queued, order = self._checked_queue(state.get("queue"))
        opened = self.plan.load(state["plan"], self._max_span, queued)
        with self._lock:
            self._first_ticket = int(state["plan"]["ticket"])
            self._resume = (opened, queued, order) if opened else None
            self._loaded = state

    def _checked_queue(self, held: Any) -> Tuple[np.ndarray, Optional[Dict[str, Any]]]:
        """The ordinals a state's queue held, and its order state: no more than the queue can
        hold (never inflated further), no record twice, an order state of their size."""
        if held is None:
            return np.empty(0, np.int64), None
        if not isinstance(held, dict) or not isinstance(held.get("order"), dict):
            raise InvalidArgumentError(f"{REFUSED}: its queue is not its ordinals and order")
        try:
            queued = unpack_ints(held.get("ordinals"), self._most_held)
        except ValueError as e:
            raise InvalidArgumentError(f"{REFUSED}: the state's queue ordinals (at most the "
                                       f"queue's capacity and a batch, {self._most_held}): "
                                       f"{e}") from None
        ordered = np.sort(queued)
        twice = ordered[1:][ordered[1:] == ordered[:-1]]
        if len(twice):
            raise InvalidArgumentError(f"{REFUSED}: the state's queue lists record "
                                       f"{int(twice[0])} twice")
        order = held["order"]
        ahead, size = order.get("ahead", 0), order.get("ahead_size", 0)
        if type(ahead) is not int or type(size) is not int or not 0 <= ahead <= len(queued) \
                or not 0 <= size <= len(queued) or ahead * size > len(queued):
            raise InvalidArgumentError(f"{REFUSED}: the state's queue order names batches "
                                       f"drawn ahead that its {len(queued)} records cannot "
                                       f"hold")
        if set(order) - {"ahead", "ahead_size"}:
            # a shuffle queue's: its arrivals not shuffled in yet, its generator
            appended = order.get("appended")
            if isinstance(appended, bool) or not isinstance(appended, int) \
                    or not 0 <= appended <= len(queued):
                raise InvalidArgumentError(f"{REFUSED}: the state's queue order 'appended' is "
                                           f"not a count of at most {len(queued)}")
            try:
                np.random.default_rng(0).bit_generator.state = order.get("rng")
            except (TypeError, ValueError, KeyError) as e:
                raise InvalidArgumentError(f"{REFUSED}: the state's queue order 'rng' is not "
                                           f"a generator's state ({type(e).__name__})") from None
        return queued, order

    def _put_back(self, opened: List[Tuple[int, List[int], np.ndarray]], queued: np.ndarray,
                  order: Optional[Dict[str, Any]]) -> None:
        """Reads the saved records again: those that were in the queue go back in the
        queue's order with its order state, the rest after them, in ordinal order."""
        values, ordinals = [], []
        for base, where, left in opened:
            chunk_values, _, kept = self.plan.reread(where)
            wanted = left[kept]
            values.append(chunk_values[wanted])
            ordinals.append(base + kept[wanted])
            skipped = np.setdiff1d(np.flatnonzero(left), kept)  # damaged now, skipped
            if len(skipped):
                self.plan.delivered(base + skipped)
        all_values, all_ordinals = np.concatenate(values), np.concatenate(ordinals)
        at = np.searchsorted(all_ordinals, queued)
        if len(queued) and (at.max() >= len(all_ordinals)
                            or not np.array_equal(all_ordinals[at], queued)):
            raise InvalidArgumentError("the state's queue holds records its open chunks do "
                                       "not list: the state is damaged")
        rest = np.setdiff1d(np.arange(len(all_ordinals)), at, assume_unique=True)
        for places, load in ((at, True), (rest, False)):
            if not len(places):
                continue
            try:
                element = self._element(all_values[places], all_ordinals[places])
            except _PartlyParsed as partly:
                raise partly.error from None
            if load:
                self._queue._real(element, batched=True)._load(element, order)
            else:
                self._queue.enqueue_many(element)


def _probed_length(files: List[str], reader: Any) -> Optional[float]:
    """The average length of the first file's first ``_PROBED_RECORDS`` records, by their
    headers, where ``reader`` (the plan's) is an uncompressed ``TFRecordReader`` and the file
    a regular one; None where they cannot be probed. The headers are only a hint: a damaged
    one picks a chunk size and a mode, the read itself reports the damage."""
    if not isinstance(reader, TFRecordReader) or reader._compression or not files \
            or not os.path.isfile(files[0]):  # (a pipe, a remote file: not probed)
        return None
    lengths: List[int] = []
    try:
        with open(files[0], "rb") as f:
            while len(lengths) < _PROBED_RECORDS:
                header = f.read(HEADER_BYTES)
                if len(header) < HEADER_BYTES:
                    break
                length = _LENGTH.unpack_from(header)[0]
                lengths.append(length)
                f.seek(length + FRAME_BYTES - HEADER_BYTES, os.SEEK_CUR)
    except (OSError, OverflowError, ValueError):  # unreadable here (the read will say why)
        return None
    return sum(lengths) / len(lengths) if lengths else None


def _default_read_batch_size(batch_size: int, length: Optional[float]) -> int:
    """``read_batch_features``' default ``read_batch_size`` for records of ``length`` bytes
    on average (None: not probed): where the compiled core parses, about ``_CHUNK_BYTES`` of
    records, at least ``_CHUNK_RECORDS`` and at most ``_MOST_CHUNK_RECORDS`` (2,048 records
    of up to 4 KiB, 512 of 16 KiB or more, or of a length unknown); on the pure path
    ``_CHUNK_RECORDS`` (there bigger chunks cost more: float, 2,048 against 512, 1.34x the
    CPU a record in two A/B runs); at least a batch."""
    records = _CHUNK_RECORDS
    if length is not None and core_available():
        records = min(_MOST_CHUNK_RECORDS,
                      max(_CHUNK_RECORDS, int(_CHUNK_BYTES // max(length, 1))))
    return max(batch_size, records)


def _parsed_before(length: Optional[float]) -> bool:
    """Whether ``read_batch_features`` (without a ``parse_fn``) parses each chunk before the
    queue instead of each batch drawn from it: where the records were probed
    (:func:`_probed_length`) and are ``_PARSED_BEFORE_BYTES`` long or longer on average.

    Long records parsed after the queue cost more CPU each: the values parsed out of the
    drawn batches (a 100 KB string each) are freed in the order the batches are consumed,
    which hands malloc's heap back to the system and faults it in again (100 KB records,
    12 epochs, one thread, steady CPU a record parsed after and before: 5.8 page faults
    and 62-73 us against 0.4 and 47 us; the pure path 16.1 and 100 us against 0.4 and 60;
    16 KB records: 10.0-10.6 against 8.5-8.8 us). Short and ragged records, which the
    queue holds more cheaply serialized than parsed, and whose walk runs beside the other
    threads in the drawn batches, stay parsed after, and so do schemas with a
    ``VarLenFeature`` (a chunk's would give each row the chunk's longest list as its dense
    shape). Either way the batches hold the same values in the same order while every
    record parses. A record that does not parse is named in the error either way (its index
    then is its place in its chunk, not in its batch); parsed before the queue, the records
    of its chunk before it are delivered first, those after it are not (parsed after the
    queue, the batches before its batch are delivered)."""
    return length is not None and length >= _PARSED_BEFORE_BYTES


def _default_enqueue_threads() -> int:
    """``read_batch_features``' default ``num_enqueue_threads``: when the compiled core parses
    (it lets go of the GIL for the walk), the cores this process may use less the one the
    consumer, the training loop, runs on, at least 1; else 1 (on the pure path two threads
    take turns on the GIL and run slower than one).

    Two enqueue threads gain over one only in the share of a record's work done without the
    GIL, less the GIL's hand-overs between cores: on a 2-core host, with a consumer that
    does nothing but take the batches, 1.0-1.6x one (docs/performance.md, "Where it
    stands"). A training loop's own work needs the core left to it, which a second enqueue
    thread would take."""
    if not core_available():
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # no sched_getaffinity (macOS, Windows)
        cores = os.cpu_count() or 1
    return max(1, cores - 1)


def _share_files(file_pattern: Any, reader: Callable[[], Any]) -> Tuple[Any, Callable[[], Any]]:
    """``shard_files``' result as its files, read by its reader (which keeps only this
    process's records where the share splits files by record); anything else as it is."""
    from queuepipe.distributed import FileShare

    if not isinstance(file_pattern, FileShare):
        return file_pattern, reader
    if reader is TFRecordReader:
        return file_pattern.files, file_pattern.reader
    if file_pattern.record_shard.world_size > 1:
        raise InvalidArgumentError(
            f"read_batch_features: this share reads records {file_pattern.record_shard} of each "
            "file, which only its own reader does: leave reader= out (or pass share.reader)")
    return file_pattern.files, reader


def read_batch_features(file_pattern: Any, batch_size: int, features: Mapping[str, Any],
                        reader: Callable[[], Any] = TFRecordReader,
                        randomize_input: bool = True, num_epochs: Optional[int] = None,
                        queue_capacity: int = 10000, reader_num_threads: int = 1,
                        num_enqueue_threads: Optional[int] = None,
                        parse_fn: Optional[Callable[[np.ndarray], Any]] = None,
                        seed: Optional[int] = None,
                        allow_smaller_final_batch: Optional[bool] = None,
                        read_batch_size: Optional[int] = None,
                        name: Optional[str] = None, shuffle: str = "buffer",
                        state: Optional[Dict[str, Any]] = None) -> Batches:
    """Batches of parsed features from record files, in one call (``tf.contrib.learn``'s).

    The whole pipeline, built from the bulk paths so that no Python runs per record, as TF's
    is built: a :class:`~queuepipe.plan.ReadPlan` cuts the files into chunks of up to
    ``read_batch_size`` records (each epoch in a new file order when ``randomize_input``);
    ``num_enqueue_threads`` threads each take a chunk and ``enqueue_many`` its serialized
    records on a RandomShuffleQueue (a FIFOQueue without ``randomize_input`` or with
    ``shuffle="global"``), then draw the batches of ``batch_size`` records a dequeue would
    take next and parse them with ``parse_example`` (a few batches a call, the core's walk
    without the GIL); the consumer picks the parsed batches up. Records of 16 KB or more
    on average (an uncompressed TFRecord file's first records, by their headers) of a
    schema of FixedLenFeatures are parsed a chunk at a time before the queue instead, which
    costs them less (the same batches).

    Usage::

        features = {"image": qp.io.FixedLenFeature([], qp.string),
                    "label": qp.io.FixedLenFeature([], qp.int64)}
        batches = qp.train.read_batch_features("data/train-*.tfrecord", 128, features,
                                               num_epochs=5, seed=0)
        for batch in batches:        # {"image": (128,) bytes, "label": (128,) int64}
            ...
        state = batches.state_dict()  # JSON-able: resume with state=state

    Args:
      file_pattern: a glob pattern, a list of patterns or paths (globbed now: files that
        appear later are not read), or what :func:`~queuepipe.distributed.shard_files`
        returns (its files, read by its reader).
      batch_size: the number of records per batch.
      features: feature key -> :class:`~queuepipe.parsing.FixedLenFeature` (a batch holds
        one row per record) or :class:`~queuepipe.parsing.VarLenFeature` (a batch holds one
        batched SparseValue whose dense_shape is ``[rows, the batch's longest list]``, as
        TF's parse of the batch gives it).
      reader: a zero-argument callable making a reader (a reader class, or a
        ``functools.partial`` of one with its options).
      randomize_input: shuffle the file order each epoch and the records through a
        RandomShuffleQueue; False keeps each file's record order (files in sorted order).
      num_epochs: read every file this many times, then end; None reads forever.
      queue_capacity: the queue's capacity; while it is open, a dequeue leaves half of it
        behind to draw from (the shuffle buffer).
      reader_num_threads: kept for TF's signature: the plan reads a file's first pass one
        chunk at a time (``num_enqueue_threads`` parse in parallel; they read in parallel
        too in later epochs, by the offsets of the chunks that pass noted, and with
        ``shuffle="global"``).
      num_enqueue_threads: threads that read, parse and enqueue. None (the default): the
        cores this process may use (``os.sched_getaffinity``) less the consumer's, at least
        1, when the compiled core parses (its walk runs without the GIL); 1 on the
        pure-Python path, where threads take turns on the GIL and two run slower than one.
      parse_fn: replaces ``parse_example(serialized, features)``: takes the object array of
        serialized records of a chunk and returns a dict (or tuple) of arrays with one row per
        record, e.g. with images already decoded by ``decode_raw``; it runs on each chunk as
        it is read (as TF's ``parse_fn`` does, before the shuffle queue), and the queue then
        holds its rows.
      seed: makes the batches a function of the seed and the files alone, whatever the
        threads (chunks are enqueued in plan order); seeds the file orders and the shuffle.
      allow_smaller_final_batch: deliver the last, smaller batch; by default True when
        ``num_epochs`` is set (nothing is lost) and False otherwise.
      read_batch_size: records per chunk. By default, when the compiled core parses, about
        8 MiB of records, by the first file's first headers: 2,048 records of up to 4 KiB,
        512 of 16 KiB or more, or where the records cannot be probed (a compressed or
        remote file, another reader); 512 on the pure-Python path; at least
        ``batch_size``. A chunk costs a read, a put and a wake-up of the consumer whatever
        its size: bigger ones cost less CPU a record, and hold more memory. The size is the
        records' as stored: a ``parse_fn`` that makes much more of each (images decoded
        from small files) wants a ``read_batch_size`` of its own, as each enqueue thread
        holds a chunk of its outputs. A state saved with the default resumes whatever the
        default of the pipeline that loads it.
      name: the scope of the queues' names; by default ``read_batch_features``, made unique.
      shuffle: ``"buffer"`` (with ``randomize_input``: the shuffle queue's buffer of
        ``queue_capacity // 2`` records) or ``"global"``: each epoch visits every record of
        every file in one seeded random permutation, read by offset; it needs a ``.index``
        beside every file (``write_shards`` and ``queuepipe index`` write them) and an
        uncompressed TFRecordReader, and makes no buffer.
      state: a :meth:`Batches.state_dict` of this pipeline (same files and arguments):
        resume where it was taken.

    Returns:
      A :class:`Batches` of dicts (the structure ``parse_fn`` returns, if given), with
      :meth:`~queuepipe.batching.Batches.state_dict`.

    Raises:
      NotFoundError: no file matches ``file_pattern``.
      ValueError: ``num_epochs`` is neither None nor a positive integer (as the producers
        say).
      InvalidArgumentError: a size or count is not a positive integer, a feature is a
        FixedLenSequenceFeature and no ``parse_fn`` is given, ``shuffle`` is unknown or
        ``"global"`` lacks its indexes, or ``state`` is not this pipeline's.
      Exception: (from the batches, chained) a damaged file's ``DataLossError``, a record's
        parse ``InvalidArgumentError`` naming its key ``b"<file>:<offset>"``.
    """
    batch_size = _positive_int(batch_size, "batch_size")
    queue_capacity = _positive_int(queue_capacity, "queue_capacity")
    _positive_int(reader_num_threads, "reader_num_threads")
    if num_enqueue_threads is None:
        num_enqueue_threads = _default_enqueue_threads()
    num_enqueue_threads = _positive_int(num_enqueue_threads, "num_enqueue_threads")
    num_epochs = _check_num_epochs(num_epochs)
    if read_batch_size is not None:
        read_batch_size = _positive_int(read_batch_size, "read_batch_size")
    if shuffle not in SHUFFLES:
        raise InvalidArgumentError(f"shuffle must be one of {SHUFFLES}, got {shuffle!r}")
    if parse_fn is None:
        for key, spec in features.items():
            if not isinstance(spec, (FixedLenFeature, VarLenFeature)):
                raise InvalidArgumentError(
                    f"read_batch_features parses FixedLenFeatures and VarLenFeatures: "
                    f"feature {key!r} is a {type(spec).__name__}; use one of those, or a "
                    f"parse_fn that returns rows of a fixed shape or SparseValues")

    file_pattern, reader = _share_files(file_pattern, reader)
    files = [os.fsdecode(f) for f in match_filenames_once(file_pattern)()]
    if not files:
        raise NotFoundError(f"read_batch_features: no file matches {file_pattern!r}")
    if allow_smaller_final_batch is None:
        allow_smaller_final_batch = num_epochs is not None
    order = "global" if shuffle == "global" else "files" if randomize_input else "sorted"
    # Unseeded, the plan still has a seed (fresh entropy), which a state keeps: a resumed
    # pipeline then finds the epochs' file orders of the one it resumes.
    plan_seed = seed if seed is not None else int(np.random.SeedSequence().generate_state(
        1, np.uint64)[0] >> np.uint64(1))
    plan_reader = reader_of(reader())
    length = _probed_length(files, plan_reader)
    # A default chunk depends on the path and the files' first records: a state saved with
    # the same arguments may hold chunks of any default size (the pure path's 512 against
    # the core's 2,048), which the order of the batches does not depend on.
    loaded_chunk_size = 0
    if read_batch_size is None:
        read_batch_size = _default_read_batch_size(batch_size, length)
        loaded_chunk_size = max(batch_size, _MOST_CHUNK_RECORDS)
    plan = ReadPlan(files, reader, read_batch_size, num_epochs, order, plan_seed,
                    keyed=parse_fn is None, reader=plan_reader,
                    loaded_chunk_size=loaded_chunk_size)
    # (FixedLenFeatures only: a chunk's VarLenFeature would give each of its rows the
    # chunk's longest list as its dense shape, where a batch parsed alone has its own)
    parse_before = parse_fn is None and _parsed_before(length) and all(
        isinstance(spec, FixedLenFeature) for spec in features.values())
    planned = _Planned(plan, features, parse_fn, ordered=seed is not None,
                       threads=num_enqueue_threads, capacity=queue_capacity,
                       batch_size=batch_size, parse_before=parse_before)
    buffered = randomize_input and shuffle == "buffer"
    batches = _batching([plan.take] * num_enqueue_threads, 1, scope=_scope(name,
                        "read_batch_features"), batch_size=batch_size, capacity=queue_capacity,
                        min_after_dequeue=queue_capacity // 2 if buffered else None,
                        seed=seed, enqueue_many=True,
                        allow_smaller_final_batch=allow_smaller_final_batch,
                        ordered=seed is not None, structure=planned.structure,
                        make_op=planned.make_op,
                        draw_ahead=_drawn_ahead(read_batch_size, batch_size,
                                                  num_enqueue_threads),
                        finish=planned.parse if parse_fn is None and not parse_before
                        else None)
    batches._saver = planned
    batches._on_stop.append(plan.close)
    if state is not None:
        batches.load_state_dict(state)
    records = _indexed_total(files) if num_epochs is not None else None
    if records is not None and num_epochs is not None:
        total = records * num_epochs
        batches._length = -(-total // batch_size) if allow_smaller_final_batch \
            else total // batch_size
    return batches


def _indexed_total(files: List[str]) -> Optional[int]:
    """The records of ``files`` by their ``.index`` files, or None unless every local file
    has one that matches it."""
    total = 0
    for path in files:
        count = indexed_count(path)[0] if os.path.isfile(path) else None
        if count is None:
            return None
        total += count
    return total
