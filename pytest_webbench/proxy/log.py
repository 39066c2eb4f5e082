"""The proxy's call log: one JSON object per line, appended as calls finish.

Readers (the grader, the report) must survive a log cut off by a crash or a stray line, so
`read_call_log` skips what it cannot parse and says how much it skipped.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, BinaryIO, Literal

import msgspec
from pydantic import BaseModel, Field, ValidationError
from pydantic_core import PydanticSerializationError

from ..results.well_formed import well_formed

MAX_ARGUMENT_CHARS = 4000
MAX_RESULT_CHARS = 2000


class CallRecord(BaseModel):
    time: float
    trial: str
    seq: int
    method: str
    tool: str | None = None
    arguments: Any = None
    decision: Literal["forwarded", "rejected"]
    rule: str | None = None
    outcome: Literal["ok", "tool_error", "error", "rejected"] = "ok"
    detail: str | None = None
    latency_ms: float = 0.0
    webmcp: dict[str, Any] | None = None
    cap_reached: bool = False
    result: str | None = None  # what the agent got back (its text parts, bounded), for the trial's timeline
    saw: list[str] | None = None  # answer fields this result was the first to show (grading/evidence.py)


# A CallRecord as the proxy writes it, made from the model's own fields and defaults so the two
# cannot drift: unvalidated (the proxy makes every value itself; validating cost ~4 us of the call
# it logs before answering). tests/test_proxy_encoding.py holds its lines to pydantic's.
CallLine = msgspec.defstruct(
    "CallLine", [(name, Any) if field.is_required() else (name, Any, field.default)
                 for name, field in CallRecord.model_fields.items()], kw_only=True)


_ENCODER = msgspec.json.Encoder()
# what msgspec cannot write as pydantic would: a lone surrogate, an int past 64 bits, a value of a
# type it does not know (a nested model): such a record takes pydantic's path
_NOT_FAST = (msgspec.EncodeError, TypeError, UnicodeEncodeError, OverflowError, ValueError)


def bounded(value: Any, limit: int = MAX_ARGUMENT_CHARS) -> Any:
    """Arguments are logged whole when small (their compact JSON within `limit` bytes, measured by
    msgspec: json.dumps cost ~2.5 us on every call), else as a truncated JSON string."""
    try:
        if len(_ENCODER.encode(value)) <= limit:
            return value
    except _NOT_FAST:
        pass
    text = json.dumps(value, default=str)
    if len(text) <= limit:
        return value
    return {"truncated": True, "chars": len(text), "head": text[:limit]}


def record_line(record: BaseModel) -> bytes:
    """One record as its JSON line. A validated record of plain JSON values is its field dict
    (msgspec writes it in ~0.5 us against pydantic's ~2.5, and the proxy writes a line before each
    reply); a test holds the two to the same value."""
    try:
        return _ENCODER.encode(record.__dict__) + b"\n"
    except _NOT_FAST:
        pass
    try:
        return record.model_dump_json().encode() + b"\n"
    except PydanticSerializationError:  # what the agent sent spells a lone surrogate, or nests past the serializer
        return type(record).model_validate(well_formed(record.model_dump())).model_dump_json().encode() + b"\n"


def call_line(**fields: Any) -> bytes:
    """A CallRecord's line from its fields; what msgspec cannot write takes pydantic's path."""
    try:
        return _ENCODER.encode(CallLine(**fields)) + b"\n"
    except _NOT_FAST:
        return record_line(CallRecord(**fields))


class CallLog:
    """Appends records to a JSON-lines file kept open for the session, one flushed line per call,
    so a reader (or a crash) never sees half a record from us."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._file: BinaryIO | None = None

    def write(self, record: BaseModel) -> None:  # a CallRecord; the model gateway writes its ModelCall the same way
        self._append(record_line(record))

    def write_call(self, **fields: Any) -> None:
        self._append(call_line(**fields))

    def _append(self, line: bytes) -> None:
        with self._lock:
            if self._file is None:
                self._file = self.path.open("ab")
            self._file.write(line)
            self._file.flush()

    def close(self) -> None:
        import errno

        with self._lock:
            file, self._file = self._file, None
            if file is None:
                return
            try:
                file.close()
            except OSError as exc:
                # a full (or read-only) results disk: the line that could not be flushed is lost, and the
                # run stops at its next record saying why (trial/recorder.py); a trial's teardown must not
                # fail on it too and turn that stop into a crash
                if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
                    raise


class CallLogContents(BaseModel):
    records: list[CallRecord] = Field(default_factory=list)
    unreadable_lines: int = 0


def read_call_log(path: Path) -> CallLogContents:
    contents = CallLogContents()
    if not path.exists():
        return contents
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if not line.strip():
            continue
        try:
            contents.records.append(CallRecord.model_validate_json(line))
        except (ValidationError, ValueError):
            contents.unreadable_lines += 1
    return contents
