"""Tests for queuepipe.coordinator: TF's Coordinator semantics, Ctrl-C, LooperThread."""

import _thread
import re
import sys
import threading

import pytest
from helpers import usage_block, wait_until

import queuepipe as qp
from queuepipe.coordinator import Coordinator, LooperThread
from queuepipe.errors import OutOfRangeError


def test_namespaces_export_coordinator():
    assert qp.Coordinator is Coordinator
    assert qp.train.Coordinator is Coordinator
    assert qp.train.LooperThread is LooperThread


@pytest.mark.parametrize("obj", [Coordinator, LooperThread])
def test_usage_block_runs(obj):
    exec(compile(usage_block(obj), f"<{obj.__name__} usage>", "exec"), {})


def test_first_exception_wins():
    coord = Coordinator()
    first, second = ValueError("first"), RuntimeError("second")
    coord.request_stop(first)
    coord.request_stop(second)
    assert coord.should_stop()
    assert coord.requested_exception is first
    with pytest.raises(ValueError, match=r"^first$"):
        coord.raise_requested_exception()


def test_error_after_plain_stop_is_not_recorded():
    # TF: only an exception reported while the coordinator is still running is kept.
    coord = Coordinator()
    coord.request_stop()
    coord.request_stop(ValueError("late"))
    coord.raise_requested_exception()
    coord.join()


def test_exc_info_tuple_is_accepted():
    coord = Coordinator()
    try:
        raise KeyError("from exc_info")
    except KeyError:
        coord.request_stop(sys.exc_info())
    with pytest.raises(KeyError, match=r"from exc_info"):
        coord.join()


def test_request_stop_rejects_a_non_exception():
    coord = Coordinator()
    with pytest.raises(TypeError, match=r"^ex must be an exception .*got 'oops'$"):
        coord.request_stop("oops")
    assert not coord.should_stop()


def test_out_of_range_is_a_clean_stop():
    coord = Coordinator()
    coord.request_stop(OutOfRangeError("input exhausted"))
    assert coord.should_stop()
    assert coord.requested_exception is None
    coord.join()


def test_custom_clean_stop_types():
    coord = Coordinator(clean_stop_exception_types=(StopIteration,))
    coord.request_stop(StopIteration())
    assert coord.should_stop()
    assert coord.requested_exception is None
    # OutOfRangeError is no longer a clean stop for this coordinator.
    coord.clear_stop()
    coord.request_stop(OutOfRangeError("end"))
    with pytest.raises(OutOfRangeError, match=r"^end$"):
        coord.join()


def test_stop_on_exception_records_and_swallows():
    coord = Coordinator()
    with coord.stop_on_exception():
        raise ValueError("in the body")
    assert coord.should_stop()
    with pytest.raises(ValueError, match=r"^in the body$"):
        coord.join()


def test_stop_on_exception_without_exception_does_not_stop():
    coord = Coordinator()
    with coord.stop_on_exception():
        pass
    assert not coord.should_stop()


def test_keyboard_interrupt_in_stop_on_exception_requests_stop_with_it():
    coord = Coordinator()
    with coord.stop_on_exception():
        raise KeyboardInterrupt()
    assert coord.should_stop()
    with pytest.raises(KeyboardInterrupt):
        coord.join()


def test_wait_for_stop_times_out_without_a_stop():
    coord = Coordinator()
    assert coord.wait_for_stop(0.05) is False
    assert coord.wait_for_stop(0) is False
    coord.request_stop()
    assert coord.wait_for_stop(0) is True


def test_wait_for_stop_blocks_until_stop_is_requested():
    coord = Coordinator()
    results = []
    waiter = threading.Thread(target=lambda: results.append(coord.wait_for_stop()))
    waiter.start()
    waiter.join(0.1)
    assert waiter.is_alive()  # still blocked: nobody asked to stop
    coord.request_stop()
    waiter.join(10)
    assert results == [True]


def test_join_reraises_the_exception_of_a_thread():
    coord = Coordinator()

    def fail():
        with coord.stop_on_exception():
            raise ValueError("worker failed")

    threads = [threading.Thread(target=fail)]
    threads[0].start()
    with pytest.raises(ValueError, match=r"^worker failed$"):
        coord.join(threads)
    assert coord.joined


def test_join_returns_when_threads_end_without_a_stop():
    coord = Coordinator()
    done = threading.Event()
    thread = threading.Thread(target=done.wait)
    coord.register_thread(thread)
    thread.start()
    done.set()
    coord.join()
    assert not thread.is_alive()
    assert not coord.should_stop()
    assert coord.joined


def test_join_waits_for_registered_threads_until_stop():
    coord = Coordinator()

    def work():
        while not coord.should_stop():
            coord.wait_for_stop(0.01)

    thread = threading.Thread(target=work)
    coord.register_thread(thread)
    thread.start()
    joiner = threading.Thread(target=coord.join)
    joiner.start()
    joiner.join(0.1)
    assert joiner.is_alive()  # join blocks while the thread runs and nobody stopped
    coord.request_stop()
    joiner.join(10)
    assert not joiner.is_alive() and not thread.is_alive()


@pytest.fixture
def stuck():
    """A thread that ignores the coordinator: it ends only at teardown, when its event is set."""
    release = threading.Event()
    thread = threading.Thread(target=release.wait, name="stuck-worker")
    thread.start()
    yield thread
    release.set()
    thread.join()


def test_join_names_a_thread_alive_after_the_grace_period(stuck):
    coord = Coordinator()
    coord.request_stop()
    with pytest.raises(RuntimeError,
                       match=r"^Coordinator stopped with threads still running: stuck-worker$"):
        coord.join([stuck], stop_grace_period_secs=0.05)
    assert stuck.is_alive()


def test_join_can_ignore_live_threads(stuck):
    coord = Coordinator()
    coord.request_stop()
    coord.join([stuck], stop_grace_period_secs=0.05, ignore_live_threads=True)
    assert coord.joined


def test_join_prefers_the_exception_over_live_threads(stuck):
    coord = Coordinator()
    coord.request_stop(ValueError("root cause"))
    with pytest.raises(ValueError, match=r"^root cause$"):
        coord.join([stuck], stop_grace_period_secs=0.05)


def test_join_gives_threads_the_grace_period_to_end():
    coord = Coordinator()
    release = threading.Event()

    class SlowToStop(threading.Thread):
        def run(self):
            coord.wait_for_stop()
            release.wait()  # still alive when join starts its grace period

        def join(self, timeout=None):
            release.set()  # join is now waiting out the grace period for this thread
            super().join(timeout)

    thread = SlowToStop()
    thread.start()
    coord.request_stop()
    coord.join([thread], stop_grace_period_secs=30)
    assert release.is_set()
    assert not thread.is_alive()


def test_request_stop_after_join_raises_the_late_error():
    coord = Coordinator()
    coord.request_stop()
    coord.join()
    with pytest.raises(ValueError, match=r"^too late$"):
        coord.request_stop(ValueError("too late"))
    coord.request_stop()  # a plain stop after join is harmless


def test_clear_stop_resets_flag_exception_and_joined():
    coord = Coordinator()
    coord.request_stop(ValueError("old"))
    with pytest.raises(ValueError):
        coord.join()
    coord.clear_stop()
    assert not coord.should_stop()
    assert not coord.joined
    assert coord.requested_exception is None
    coord.raise_requested_exception()
    coord.request_stop(KeyError("new"))
    with pytest.raises(KeyError, match=r"new"):
        coord.join()


def test_ctrl_c_during_join_requests_stop_and_reraises():
    coord = Coordinator()
    in_join = threading.Event()
    waiting = coord.wait_for_stop

    def spy_wait_for_stop(timeout=None):
        if threading.current_thread() is threading.main_thread():
            in_join.set()
        return waiting(timeout)

    coord.wait_for_stop = spy_wait_for_stop

    def worker():
        in_join.wait()
        _thread.interrupt_main()  # what Ctrl-C does
        while not coord.should_stop():
            waiting(0.01)

    thread = threading.Thread(target=worker, name="worker")
    coord.register_thread(thread)
    thread.start()
    with pytest.raises(KeyboardInterrupt):
        coord.join()
    assert coord.should_stop()
    assert isinstance(coord.requested_exception, KeyboardInterrupt)
    assert not thread.is_alive()


def test_looper_thread_runs_periodically_and_stops():
    coord = Coordinator()
    calls = []
    looper = LooperThread.loop(coord, 0.001, target=calls.append, args=("tick",))
    assert looper.daemon
    assert looper.name == "queuepipe/looper/append"
    wait_until(lambda: len(calls) >= 3)
    coord.request_stop()
    coord.join()  # the looper registered itself
    assert not looper.is_alive()
    count = len(calls)
    assert calls == ["tick"] * count
    coord.wait_for_stop(0.02)
    assert len(calls) == count


def test_looper_thread_subclass_hooks_run_in_order():
    coord = Coordinator()
    events = []

    class Looper(LooperThread):
        def start_loop(self):
            events.append("start")

        def run_loop(self):
            events.append("loop")
            if events.count("loop") == 3:
                coord.request_stop()

        def stop_loop(self):
            events.append("stop")

    Looper(coord, None).start()
    coord.join()
    assert events == ["start", "loop", "loop", "loop", "stop"]


def test_looper_thread_error_stops_the_coordinator():
    coord = Coordinator()

    def boom():
        raise ValueError("looper failed")

    LooperThread.loop(coord, 0.001, target=boom)
    with pytest.raises(ValueError, match=r"^looper failed$"):
        coord.join()


def test_looper_thread_argument_errors():
    with pytest.raises(ValueError, match=r"^'coord' argument must be a Coordinator, got None$"):
        LooperThread(None, 1.0, target=print)
    with pytest.raises(ValueError, match=re.escape("'args' and 'kwargs' argument require")):
        LooperThread(Coordinator(), 1.0, args=(1,))
