"""The wire between this process and an external-suite worker: length-prefixed messages over a pipe.

A message is a tree of dicts, lists, tuples, str, int, float, bool, bytes, None and numpy arrays. Arrays travel as
(dtype, shape, raw bytes) so that the two sides may run different numpy versions (the external venv pins its own);
the tree is then pickled with builtins only, and unpickling refuses every global (no code runs on load).

Stdlib and numpy only: the worker imports this file from the external venv, where this project is not installed.
"""

from __future__ import annotations

import io
import pickle
import struct

import numpy as np

_ND = "__ndarray__"
_HEADER = struct.Struct("<Q")
MAX_MESSAGE = 1 << 30
"""largest message accepted (bytes), so a corrupt length cannot make the reader allocate without bound"""


class ProtocolError(OSError):
    """The other side sent something that is not a message (it died, or wrote stray bytes to the pipe)."""


def _pack(obj):
    if isinstance(obj, np.ndarray):
        a = np.ascontiguousarray(obj)
        return {_ND: (a.dtype.str, a.shape, a.tobytes())}
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, dict):
        return {k: _pack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_pack(v) for v in obj)
    return obj


def _unpack(obj):
    if isinstance(obj, dict):
        if len(obj) == 1 and _ND in obj:
            dtype, shape, raw = obj[_ND]
            return np.frombuffer(raw, dtype=np.dtype(dtype)).reshape(shape).copy()
        return {k: _unpack(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(_unpack(v) for v in obj)
    return obj


class _NoGlobals(pickle.Unpickler):
    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"message refers to {module}.{name}: only builtin values may be sent")


def encode(obj) -> bytes:
    body = pickle.dumps(_pack(obj), protocol=4)
    return _HEADER.pack(len(body)) + body


def decode(body: bytes):
    return _unpack(_NoGlobals(io.BytesIO(body)).load())


def write_message(stream, obj) -> None:
    stream.write(encode(obj))
    stream.flush()


def _read_exact(stream, n: int) -> bytes:
    chunks, left = [], n
    while left:
        b = stream.read(left)
        if not b:
            raise ProtocolError(f"pipe closed after {n - left} of {n} bytes")
        chunks.append(b)
        left -= len(b)
    return b"".join(chunks)


def read_message(stream):
    (n,) = _HEADER.unpack(_read_exact(stream, _HEADER.size))
    if n > MAX_MESSAGE:
        raise ProtocolError(f"message of {n} bytes announced (limit {MAX_MESSAGE}): the stream is not this protocol")
    return decode(_read_exact(stream, n))
