"""Framing and array encoding shared by the grader and the sandbox.

Messages are JSON (never pickle). Between the grader and the zygote a message is an 8-byte
big-endian length followed by that many bytes; the child's records are 4-byte framed. An
array travels as ``{"shape": [...], "f8": base64 of its little-endian float64 bytes}`` so
NaN and inf survive and decoding needs no recursion.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import os
import struct
from typing import Any

import numpy as np

MAX_ELEMENTS = 1 << 22  # per answer array (4 Mi float64 = 32 MiB): attention answers are far smaller
MAX_NDIM = 8
MAX_TEXT = 2000  # characters of any string inside a record
MAX_DEPTH = 12

# What the grader's sandbox may see of the `helpers` package: the runtime that runs and measures the
# student's code, the modules the notebooks import, and the sandbox's own recorder. NOT the registry
# (`course/`: references, wrong variants, solutions), the checks built on it, or the grader.
SANDBOX_VIEW = (
    "__init__.py",
    "convert.py",
    "plotting.py",
    "scale.py",
    "quiet.py",
    "runtime",
    "grading/__init__.py",
    "grading/protocol.py",
    "grading/zygote.py",
)


class ProtocolError(ValueError):
    """Data that does not follow the protocol (from the sandbox: treat as hostile)."""


def encode_array(arr: np.ndarray) -> dict[str, Any]:
    a = np.asarray(arr, dtype="<f8")  # (not ascontiguousarray: it turns a 0-d scalar into shape (1,))
    return {"shape": list(a.shape), "f8": base64.b64encode(a.tobytes(order="C")).decode("ascii")}


def decode_array(obj: Any) -> np.ndarray:
    """Rebuild an array from :func:`encode_array`'s output, validating everything."""
    if not isinstance(obj, dict) or set(obj) != {"shape", "f8"}:
        raise ProtocolError("an answer array is not of the form {shape, f8}")
    shape, data = obj["shape"], obj["f8"]
    if not isinstance(shape, list) or len(shape) > MAX_NDIM:
        raise ProtocolError("an answer array has an invalid shape")
    if not all(type(n) is int and 0 <= n <= MAX_ELEMENTS for n in shape):
        raise ProtocolError("an answer array has an invalid shape")
    size = math.prod(shape)
    if size > MAX_ELEMENTS:
        raise ProtocolError(f"an answer array has {size} entries (at most {MAX_ELEMENTS} are accepted)")
    if not isinstance(data, str) or len(data) != 4 * ((8 * size + 2) // 3):
        raise ProtocolError("an answer array's data does not match its shape")
    try:
        raw = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        raise ProtocolError("an answer array's data is not valid base64") from None
    if len(raw) != 8 * size:
        raise ProtocolError("an answer array's data does not match its shape")
    return np.frombuffer(raw, dtype="<f8").astype(np.float64).reshape(shape)


def dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode("utf-8")


def frame(payload: bytes, width: int = 4) -> bytes:
    return struct.pack(">I" if width == 4 else ">Q", len(payload)) + payload


def split_frames(blob: bytes, limit: int = 100_000) -> tuple[list[Any], str | None]:
    """Parse 4-byte framed JSON messages; returns (messages, problem or None).

    Stops at the first malformed frame: what came before it is kept.
    """
    out: list[Any] = []
    pos = 0
    while pos < len(blob):
        if len(out) >= limit:
            return out, f"more than {limit} messages"
        if pos + 4 > len(blob):
            return out, "a truncated message"
        (n,) = struct.unpack_from(">I", blob, pos)
        if pos + 4 + n > len(blob):
            return out, "a truncated message"
        try:
            out.append(json.loads(blob[pos + 4 : pos + 4 + n].decode("utf-8"), parse_constant=_no_constants))
        except (ValueError, RecursionError, UnicodeDecodeError):
            return out, "a malformed message"
        pos += 4 + n
    return out, None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not allowed")


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def read_exact(fd: int, n: int) -> bytes:
    """Blocking read of exactly ``n`` bytes; EOFError when the other end closed first."""
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            raise EOFError("the other end closed the pipe")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def send_message(fd: int, obj: Any, blob: bytes | None = None) -> None:
    """A JSON message, optionally followed by a raw blob (both 8-byte framed)."""
    payload = frame(dumps(obj), 8)
    if blob is not None:
        payload += frame(blob, 8)
    write_all(fd, payload)


def recv_message(fd: int, limit: int = 1 << 30) -> Any:
    (n,) = struct.unpack(">Q", read_exact(fd, 8))
    if n > limit:
        raise ProtocolError(f"message of {n} bytes is too large")
    return json.loads(read_exact(fd, n).decode("utf-8"))


# --------------------------------------------------------------------------- plans and records


_DTYPES = {"f8": np.float64, "i8": np.int64, "b1": np.bool_}


def encode_value(value: Any) -> Any:
    """Plain data for JSON, arrays (float, int or bool) tagged with their kind. For plans, which the
    trusted grader sends into the sandbox."""
    if isinstance(value, np.ndarray):
        kind = {"b": "b1", "i": "i8", "u": "i8"}.get(value.dtype.kind, "f8")
        a = np.asarray(value, dtype=np.dtype(_DTYPES[kind]).newbyteorder("<"))
        return {"__array__": kind, "shape": list(a.shape), "data": base64.b64encode(a.tobytes(order="C")).decode()}
    if isinstance(value, dict):
        return {str(k): encode_value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_value(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def decode_value(obj: Any) -> Any:
    """The inverse of :func:`encode_value` (inside the sandbox, on what the grader sent)."""
    if isinstance(obj, dict):
        if "__array__" in obj:
            dtype = np.dtype(_DTYPES[obj["__array__"]]).newbyteorder("<")
            return np.frombuffer(base64.b64decode(obj["data"]), dtype=dtype).astype(dtype.newbyteorder("=")) \
                .reshape(obj["shape"])
        return {k: decode_value(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [decode_value(v) for v in obj]
    return obj


def encode_record(value: Any, depth: int = 0) -> Any:
    """A record (see :mod:`helpers.runtime.collect`) as JSON-safe data: float64 arrays as
    :func:`encode_array`, strings capped, NaN/inf numbers as strings (JSON has none)."""
    if depth > MAX_DEPTH:
        return None
    if isinstance(value, np.ndarray):
        return encode_array(value)
    if isinstance(value, dict):
        return {str(k)[:200]: encode_record(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [encode_record(v, depth + 1) for v in value]
    if isinstance(value, str):
        return value[:MAX_TEXT]
    if isinstance(value, (bool, int)) or value is None:
        return value
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, np.integer):
        return int(value)
    return str(value)[:MAX_TEXT]
