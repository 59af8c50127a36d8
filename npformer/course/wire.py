"""The wire between the grader and its worker (``sandbox.py``): length-prefixed messages, and a
case's reply as JSON that nothing can run code from.

A reply carries what the student's function returned, ``encode``d as numbers, strings, lists, tuples,
dicts and numeric arrays (as ``.npy`` bytes, read back with ``allow_pickle=False``). Both sides trust
nothing of a reply: every read has a deadline and a size limit, a reply is parsed only when its
items are few enough (``parse_reply``), checked field by field (``check_reply``), and ``decode``
refuses what ``encode`` could not have written. A reply's status is a string on the wire, read into a
``Status`` (``FROM_WIRE``): the one vocabulary of grading, from a case's reply to the grade sheet's words.
"""

from __future__ import annotations

import base64
import enum
import io
import json
import os
import select
import struct
import time

import numpy

MAX_REPLY = 4 * 2**20  # bytes one case's reply may take (the course's largest is under 10 kB)
MAX_MESSAGE = MAX_REPLY + 2**16  # a reply and its envelope: a longer message is refused unread
MAX_NODES = 100_000    # JSON lists, objects and items in one reply: more is refused before it is parsed


def encode(value, _depth: int = 0):
    """``value`` as JSON-ready data: numbers, strings, lists, tuples, dicts and numeric arrays
    (as ``.npy`` bytes); anything else as the name of its type."""
    if _depth > 20:
        return {"__object__": "a structure nested more than 20 deep"}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, numpy.generic):
        value = numpy.asarray(value)
    if isinstance(value, numpy.ndarray):
        if value.dtype.kind not in "biufcUS":
            return {"__object__": f"an array of dtype {value.dtype}"}
        buffer = io.BytesIO()
        numpy.save(buffer, numpy.ascontiguousarray(value), allow_pickle=False)
        return {"__array__": base64.b64encode(buffer.getvalue()).decode("ascii")}
    if isinstance(value, (list, tuple)):
        return {"__list__" if isinstance(value, list) else "__tuple__": [encode(item, _depth + 1) for item in value]}
    if isinstance(value, dict):
        return {"__dict__": [[encode(key, _depth + 1), encode(item, _depth + 1)] for key, item in value.items()]}
    return {"__object__": type(value).__name__}


class Unsent:
    """What the student's function returned that is not data (a generator, a module...): its type's name."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def decode(value, _depth: int = 0):
    """The inverse of ``encode``; arrays are read with ``allow_pickle=False`` and must hold numbers,
    booleans or text. What ``encode`` cannot have written (deeper than it nests, another dtype, a
    field of the wrong type) raises ValueError."""
    if _depth > 21:
        raise ValueError("an output nested deeper than encode writes")
    if not isinstance(value, dict):
        if isinstance(value, list):  # JSON lists only appear inside the markers below
            raise ValueError("a bare list in an output")
        return value
    if "__array__" in value:
        return _array(base64.b64decode(value["__array__"], validate=True))
    if "__list__" in value or "__tuple__" in value:
        items = value.get("__list__", value.get("__tuple__"))
        if not isinstance(items, list):
            raise ValueError("a list marker without a list")
        decoded = [decode(item, _depth + 1) for item in items]
        return decoded if "__list__" in value else tuple(decoded)
    if "__dict__" in value:
        decoded = {}
        for pair in value["__dict__"]:
            if not isinstance(pair, list) or len(pair) != 2:
                raise ValueError("a dict marker without pairs")
            key = decode(pair[0], _depth + 1)
            decoded[tuple(key) if isinstance(key, list) else key] = decode(pair[1], _depth + 1)
        return decoded
    return Unsent(str(value.get("__object__", "object"))[:200])


def _array(data: bytes) -> numpy.ndarray:
    """An ``.npy`` file's array, its header read first: numbers, booleans or text only, and exactly
    as many bytes of data as its shape and dtype need (a header can promise any shape; nothing is
    allocated for a promise). No pickle."""
    stream = io.BytesIO(data)
    version = numpy.lib.format.read_magic(stream)
    if version not in ((1, 0), (2, 0)):
        raise ValueError("an output array in an unknown .npy version")
    read_header = numpy.lib.format.read_array_header_1_0 if version == (1, 0) else numpy.lib.format.read_array_header_2_0
    shape, _, dtype = read_header(stream)
    if dtype.kind not in "biufcUS" or dtype.itemsize == 0 or dtype.hasobject:
        raise ValueError("an output array that is not numbers, booleans or text")
    count = 1
    for length in shape:
        count *= length
    if count * dtype.itemsize != len(data) - stream.tell():
        raise ValueError("an output array whose data is not the size its header says")
    return numpy.load(io.BytesIO(data), allow_pickle=False)


def write_message(fd: int, payload: bytes) -> None:
    """One length-prefixed message on a file descriptor."""
    data = struct.pack("<Q", len(payload)) + payload
    while data:
        data = data[os.write(fd, data):]


def read_exactly(fd: int, count: int, deadline: float | None = None) -> bytes:
    """``count`` bytes from ``fd``; with a ``deadline`` (``time.monotonic()``), a TimeoutError when
    they have not all come by then: a writer that sends half a message and sleeps blocks no one."""
    chunks, left = [], count
    while left:
        if deadline is not None and not select.select([fd], [], [], max(0.0, deadline - time.monotonic()))[0]:
            raise TimeoutError("no complete message before the deadline")
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the pipe")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_buffer(fd: int) -> bytearray:
    """One message read straight into a new ``bytearray``, with no other copy of its bytes made: the
    worker zeroes it once the job it holds is over."""
    (length,) = struct.unpack("<Q", read_exactly(fd, 8))
    buffer = bytearray(length)
    view, filled = memoryview(buffer), 0
    while filled < length:
        count = os.readv(fd, [view[filled:]])
        if not count:
            raise EOFError("the other side closed the pipe")
        filled += count
    return buffer


def read_message(fd: int, limit: int | None = None, deadline: float | None = None) -> bytes:
    """One length-prefixed message; a length over ``limit`` is refused before anything is read."""
    (length,) = struct.unpack("<Q", read_exactly(fd, 8, deadline))
    if limit is not None and length > limit:
        raise ValueError(f"a reply of {length} bytes, over the limit of {limit}")
    return read_exactly(fd, length, deadline)


class Status(enum.Enum):
    """What came of one case of an exercise, or of the whole exercise: ``on_wire``, how a case's reply
    names it (a string in the JSON, read back by ``FROM_WIRE``; "" for the grader's own findings);
    ``words``, how the grade sheet writes it, followed by a detail for some (``said``)."""

    # what a case's reply says
    RETURNED = "returned", "returned"             # a result: compared, it makes the exercise PASSED or WRONG
    RAISED = "raised", "raised"                   # said with the exception's type
    LOAD_FAILED = "load_failed", "raised"         # raised while the function was loaded
    NOT_IMPLEMENTED = "not_implemented", "not implemented yet"
    USES_NPFORMER = "npformer", "uses npformer"
    TOO_BIG = "too_big", "returned too much"
    GRADER_ERROR = "grader_error", "the grading process failed"
    # what the grader makes of an exercise
    PASSED = "", "passed"
    WRONG = "", "failed"                          # a wrong tensor, or the wrong number of them
    TOO_SLOW = "", "slower than a derived backward pass"
    NOT_COMPARED = "", "its result could not be compared"
    MALFORMED = "", "the grading process sent a malformed reply"
    UNREADABLE = "", "the grading process sent an unreadable reply"
    TIMED_OUT = "", "timed out"                   # said with "after 20 s"
    ENDED = "", "the grading process"             # said with how it ended: "died (-9)", "exited"
    PRINTED = "", "printed"                       # said with how much: "3.1 MB"
    # what ``course grade`` makes of a student's files
    MISSING = "", "missing"
    SYNTAX_ERROR = "", "syntax error"
    FILE_NOT_READ = "", "file not read"
    NOT_ON_ROSTER = "", "not on the roster"
    ONE_STUDENT_TWICE = "", "one student twice"
    GRADING_ERROR = "", "grading error"           # said with the grader's exception: "(KeyError)"

    def __init__(self, on_wire: str, words: str) -> None:
        self.on_wire, self.words = on_wire, words

    def said(self, detail: str = "") -> str:
        """The grade sheet's words, with ``detail``: ``raised ZeroDivisionError``, ``timed out after 20 s``."""
        return f"{self.words} {detail}" if detail else self.words


FROM_WIRE = {status.on_wire: status for status in Status if status.on_wire}  # what a case's reply may say

# What a reply of a case may hold, field by field: anything else, or a field of another type, makes
# the reply malformed (``check_reply``), and the job ends there.
REPLY_FIELDS = {"case": int, "status": str, "output": object, "type": str, "message": str, "file": str,
                "line": int, "module": str, "printed": int, "shown": str, "bytes": int,
                "microseconds": int}


def parse_reply(payload: bytes):
    """A reply's JSON, parsed only when it is small enough in bytes and in items (``MAX_NODES``, counted
    from its separators before anything is built: a reply of ``{},{},...`` cannot fill memory)."""
    if len(payload) > MAX_MESSAGE or sum(payload.count(mark) for mark in (b",", b"[", b"{")) > MAX_NODES:
        raise ValueError("a reply too large to parse")
    return json.loads(payload)


def check_reply(entry, expected_case: int) -> str | None:
    """Why ``entry`` (a decoded JSON reply) is not a well-formed reply for case ``expected_case``, or None."""
    if not isinstance(entry, dict):
        return "a reply that is not an object"
    for key, value in entry.items():
        kind = REPLY_FIELDS.get(key)
        if kind is None:
            return "a reply with an unknown field"
        if kind is int and (not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**53):
            return f"a reply whose {key} is not a count"
        if kind is str and (not isinstance(value, str) or len(value) > 100_000):
            return f"a reply whose {key} is not a short text"
    if entry.get("case") != expected_case:
        return "a reply out of order"
    if entry.get("status") not in FROM_WIRE:
        return "a reply of an unknown status"
    if entry["status"] == "returned" and "output" not in entry:
        return "a returned reply without its output"
    return None
