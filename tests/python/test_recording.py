"""arraybridge.recording(): every transfer made while it is on, on every thread,
with its devices, path, bytes, time and reason, added up per route; JSON out and in,
merged across processes; and nothing recorded (nor any clock read) while it is off."""
import json
import threading

import numpy as np
import pytest

import arraybridge as ab


def test_every_kind_of_call_is_recorded_with_what_it_moved_and_why():
    x = np.arange(1000, dtype=np.float64)
    with ab.recording() as rec:
        on_device = ab.to_device(x, "opencl:0", copy=True)  # never a wrap of x, aligned or not
        ab.to_device(x[::-1], "cpu", contiguous="nonnegative")
        ab.to_device([x, x[:10]], "opencl:0", copy=True)  # copies, never views of x (PoCL wraps aligned memory)
        into = np.zeros_like(x)
        ab.copy(on_device, into)
        ab.copy({"a": x}, {"a": np.zeros_like(x)})
        ab.from_dlpack(x)
    calls = [r.call for r in rec.records]
    assert calls == ["to_device", "to_device", "to_device_many", "copy", "copy_many", "from_dlpack"], calls
    up, flipped, batch, down, structure, view = rec.records
    assert (up.source, up.target, up.path, up.bytes, up.tensors) == ("cpu", "opencl:0", "host_to_device", 8000, 1)
    assert flipped.path == "host_copy" and "negative strides" in flipped.detail
    assert batch.path == "batch" and batch.tensors == 2 and batch.bytes == 8080, batch
    assert (down.source, down.target, down.path, down.bytes) == ("opencl:0", "cpu", "device_to_host", 8000)
    assert structure.tensors == 1 and structure.bytes == 8000
    assert view.path == "zero_copy" and view.bytes == 0
    assert all(r.seconds > 0 for r in rec.records)
    np.testing.assert_array_equal(into, x)


def test_rows_add_up_per_route_and_the_table_says_why():
    x = np.ones(256, dtype=np.float32)
    with ab.recording() as rec:
        for _ in range(5):
            ab.to_device(x, "opencl:0", copy=True)  # never a wrap of x, aligned or not
        ab.to_device(x, "cpu")
    rows = rec.rows()
    assert rows[0].calls == 5 and rows[0].bytes == 5 * 1024 and rows[0].target == "opencl:0"
    assert rows[0].reasons and "host to device" in rows[0].reasons[0]
    assert rows[1].path == "zero_copy" and rows[1].calls == 1
    table = rec.table()
    assert "opencl:0" in table and "host_to_device" in table and "5 " in table and "why:" in table, table


def test_transfers_on_every_thread_are_recorded():
    def work():
        for _ in range(20):
            ab.to_device(np.ones(16), "cpu", copy=True)

    with ab.recording() as rec:
        threads = [threading.Thread(target=work) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(rec) == 80


def test_nothing_is_recorded_before_or_after_and_recordings_nest():
    ab.to_device(np.ones(4), "cpu")
    with ab.recording() as outer:
        ab.to_device(np.ones(4), "cpu")
        with ab.recording() as inner:
            ab.to_device(np.ones(4), "opencl:0")
        ab.to_device(np.ones(4), "cpu")
    ab.to_device(np.ones(4), "cpu")
    assert len(outer) == 3 and len(inner) == 1
    assert ab._core.set_recorder(None) is None  # off again: nothing left set


def test_a_recording_on_twice_records_each_transfer_once_and_stays_on_until_its_last_block_ends():
    """The object-protocol hunt of 2026-11-30: a Recording entered in a nested `with` of
    itself counted every transfer twice, and its inner block's end left it on."""
    rec = ab.recording()
    with rec:
        with rec:
            ab.to_device(np.ones(4), "cpu")
        ab.to_device(np.ones(4), "cpu")  # the outer block still runs: recorded
    ab.to_device(np.ones(4), "cpu")
    assert len(rec) == 2
    with rec:  # on again after its end: it goes on adding
        ab.to_device(np.ones(4), "cpu")
    assert len(rec) == 3 and ab._core.set_recorder(None) is None


def test_two_recordings_that_compare_equal_each_end_their_own_block():
    """The review of 2026-11-30: with __eq__ by records, an inner recording's end removed
    the outer one (both on from the start, their records equal), and the outer's end
    then raised ValueError and left the recorder on for good."""
    import copy
    with ab.recording() as outer:
        with ab.recording() as inner:
            ab.to_device(np.ones(4), "cpu")
            assert inner == outer
        ab.to_device(np.ones(4), "cpu")
        on_copy = copy.copy(outer)  # a copy is off: it records nothing it is not `with`-ed for
    assert (len(outer), len(inner), len(on_copy)) == (2, 1, 2)
    ab.to_device(np.ones(4), "cpu")
    assert len(outer) == 2 and ab._core.set_recorder(None) is None
    with on_copy:
        ab.to_device(np.ones(4), "cpu")
    assert len(on_copy) == 3 and len(outer) == 2


def test_json_round_trip_and_merge_across_processes():
    with ab.recording() as rec:
        ab.to_device(np.ones(8), "opencl:0")
    text = rec.to_json()
    assert json.loads(text)["records"][0][0] == "to_device"
    back = ab.Recording.from_json(text)
    assert back.records == rec.records
    merged = ab.Recording.merged([rec, back, ab.Recording()])
    assert len(merged) == 2 and merged.rows()[0].calls == 2
    assert len(rec.merge(back)) == 2
    with pytest.raises(ValueError, match="not an arraybridge recording"):
        ab.Recording.from_json('{"records": []}')
    assert back == rec and back != ab.Recording() and rec != rec.records  # what equality means: the records


@pytest.mark.parametrize("text, said", [
    ('{"arraybridge_recording": 1}', "without its list of records"),
    ('{"arraybridge_recording": 1, "records": {}}', "without its list of records"),
    ('{"arraybridge_recording": 1, "records": [["to_device", "cpu"]]}', "record 0 .* is not a list of its 8 fields"),
    ('{"arraybridge_recording": 1, "records": [5]}', "record 0 .* is not a list of its 8 fields"),
])
def test_json_that_is_no_recording_is_a_value_error_saying_what_is_missing(text, said):
    """It raised KeyError('records') or TypeError from the record's tuple."""
    with pytest.raises(ValueError, match=said):
        ab.Recording.from_json(text)


def test_a_failing_transfer_is_not_recorded_and_a_failing_recorder_fails_no_transfer(monkeypatch):
    with ab.recording() as rec:
        with pytest.raises(ab.CopyRequiredError):
            ab.to_device(np.ones(4), "cpu", copy=False, dtype="float32")  # a cast is a copy
    assert len(rec) == 0

    def broken(*args):
        raise RuntimeError("the recorder broke")

    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    ab._core.set_recorder(broken)
    try:
        t = ab.to_device(np.arange(3.0), "cpu", copy=True)  # the transfer succeeds all the same
    finally:
        ab._core.set_recorder(None)
    np.testing.assert_array_equal(np.from_dlpack(t), np.arange(3.0))
    assert unraisable and "the recorder broke" in str(unraisable[0].exc_value)


@pytest.mark.parametrize("sigint", ["default", "ignored", "a handler of the user's"])
@pytest.mark.parametrize("hook", ["recorder", "debug log"])
def test_ctrl_c_while_a_hook_runs_is_raised_once_the_call_returns(monkeypatch, hook, sigint):
    """The threads hunt of 2026-11-30: a KeyboardInterrupt raised inside the recorder or
    the DEBUG log's handler was reported as unraisable and lost, so Ctrl-C did nothing.
    It is raised again as soon as the call returns (the transfer itself succeeded): the
    very exception, not a signal, which SIGINT ignored lost and a handler of the user's
    replaced with its own (the process hunt)."""
    import logging
    import signal
    import time

    def interrupted(*args):
        raise KeyboardInterrupt("from the hook")

    class Handled(Exception):
        pass

    def handler_of_the_users(*args):
        raise Handled
    if sigint != "default":
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN if sigint == "ignored" else handler_of_the_users)

    class Interrupting(logging.Handler):
        def emit(self, record):
            interrupted()

    unraisable = []
    monkeypatch.setattr("sys.unraisablehook", unraisable.append)
    logger = logging.getLogger("arraybridge")
    handler, level = Interrupting(), logger.level
    if hook == "recorder":
        ab._core.set_recorder(interrupted)
    else:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        with pytest.raises(KeyboardInterrupt, match="from the hook"):
            ab.to_device(np.arange(3.0), "cpu", copy=True)
            time.sleep(0.01)  # the interpreter looks for pending calls on a call
    finally:
        ab._core.set_recorder(None)
        logger.removeHandler(handler)
        logger.setLevel(level)
        if sigint != "default":
            signal.signal(signal.SIGINT, previous)
    assert not unraisable
