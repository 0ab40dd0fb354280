"""arraybridge.recording(): every transfer the package makes while it is on, on every
thread, added up by route, for the user hunting a hidden host round trip in a loop.

    with ab.recording() as rec:
        train_one_epoch()
    print(rec.table())                 # calls, bytes and time per call, devices and path
    merged = ab.Recording.merged([ab.Recording.from_json(text) for text in from_workers])

Off, it costs nothing a transfer can measure: the C side tests one pointer and reads
no clock. Recordings nest: each one on sees every transfer made while it is."""
import json
import threading
from collections import namedtuple

from ._device import device_string
from ._lib import _core

TransferRecord = namedtuple("TransferRecord", "call source target path bytes seconds detail tensors")
TransferRecord.__doc__ = """One call: `call` (to_device, to_device_many, copy, copy_many, from_dlpack,
__dlpack__), the `source` and `target` devices ("several" for a batch over more than
one), the planner's `path` ("batch" for a batch), the `bytes` written, the call's
`seconds` (queued work not waited for is not in them), the report's `detail` (why
the data moved as it did), and the `tensors` it moved."""

Row = namedtuple("Row", "call source target path calls tensors bytes seconds reasons")
Row.__doc__ = """The records of one (call, source, target, path), added up; `reasons`:
the distinct details among them, at most four, most frequent first."""

_lock = threading.Lock()
_on = []  # the recordings on now, in the order they started


def _device_name(pair):
    return "several" if pair[0] == 0 else device_string(*pair)


def _record(call, source, target, path, nbytes, detail, tensors, seconds):
    """The C side's recorder while any recording is on."""
    record = TransferRecord(call, _device_name(source), _device_name(target), "batch" if path == "none" else path,
                            nbytes, seconds, detail, tensors)
    for recording in tuple(_on):
        recording.records.append(record)  # a list's append is atomic under the GIL


class Recording:
    """The transfers made while it was on (`records`, in order); see recording()."""

    def __init__(self, records=()):
        self.records = list(records)
        self._entered = 0  # a recording on twice (nested `with` blocks of it) records each transfer once

    def __enter__(self):
        with _lock:
            self._entered += 1
            if self._entered == 1:
                _on.append(self)
                _core.set_recorder(_record)
        return self

    def __exit__(self, *exc):
        with _lock:
            self._entered -= 1
            if self._entered == 0:
                # By identity: two recordings on at once hold the same records, so they compare equal.
                del _on[next(i for i, on in enumerate(_on) if on is self)]
                if not _on:
                    _core.set_recorder(None)
        return False

    def __getstate__(self):  # a copy or an unpickled one is off until its own `with`
        return {"records": self.records}

    def __setstate__(self, state):
        self.records = list(state["records"])  # its own: a copy adds to its own list
        self._entered = 0

    def rows(self):
        """The records added up per (call, source, target, path), most bytes first."""
        added, reasons = {}, {}
        for r in self.records:
            key = (r.call, r.source, r.target, r.path)
            calls, tensors, nbytes, seconds = added.get(key, (0, 0, 0, 0.0))
            added[key] = (calls + 1, tensors + r.tensors, nbytes + r.bytes, seconds + r.seconds)
            counted = reasons.setdefault(key, {})
            counted[r.detail] = counted.get(r.detail, 0) + 1
        rows = [Row(*key, *totals, tuple(sorted(reasons[key], key=reasons[key].get, reverse=True)[:4]))
                for key, totals in added.items()]
        return sorted(rows, key=lambda row: (-row.bytes, -row.calls))

    def table(self):
        """rows() as a text table, one line a row and its most frequent reason below it."""
        rows = self.rows()
        header = ("call", "from", "to", "path", "calls", "tensors", "bytes", "seconds")
        lines = [header] + [(r.call, r.source, r.target, r.path, str(r.calls), str(r.tensors), _size(r.bytes),
                             f"{r.seconds:.6f}") for r in rows]
        widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
        out = ["  ".join(cell.ljust(width) for cell, width in zip(header, widths)).rstrip()]
        for row, line in zip(rows, lines[1:]):
            out.append("  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip())
            out.append(f"    why: {row.reasons[0] or '(no report)'}")
        return "\n".join(out)

    def to_json(self):
        """The records as JSON text, for from_json in another process."""
        return json.dumps({"arraybridge_recording": 1, "records": [list(r) for r in self.records]})

    @classmethod
    def from_json(cls, text):
        """The Recording that to_json wrote (in this process or another)."""
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("arraybridge_recording") != 1:
            raise ValueError("not an arraybridge recording (Recording.to_json makes one)")
        records = data.get("records")
        if not isinstance(records, list):
            raise ValueError("an arraybridge recording without its list of records (Recording.to_json makes one)")
        fields = len(TransferRecord._fields)
        for i, record in enumerate(records):
            if not isinstance(record, list) or len(record) != fields:
                raise ValueError(f"record {i} of the arraybridge recording is not a list of its {fields} fields "
                                 f"({', '.join(TransferRecord._fields)}): {record!r:.80}")
        return cls(TransferRecord(*record) for record in records)

    def merge(self, other):
        """A Recording of both's records (another process's, through from_json)."""
        return Recording(self.records + list(other.records))

    @classmethod
    def merged(cls, recordings):
        """One Recording of all of theirs."""
        made = cls()
        for recording in recordings:
            made.records.extend(recording.records)
        return made

    def __len__(self):
        return len(self.records)

    def __eq__(self, other):
        """The same records in the same order (a recording that went through JSON equals itself)."""
        return self.records == other.records if isinstance(other, Recording) else NotImplemented

    __hash__ = None  # records are added while it is on

    def __repr__(self):
        return f"arraybridge.Recording({len(self.records)} transfers)"


def recording():
    """A Recording that collects every transfer arraybridge makes, on every thread,
    while its `with` block runs: `with ab.recording() as rec: ...; print(rec.table())`."""
    return Recording()


def _size(nbytes):
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return str(nbytes)
